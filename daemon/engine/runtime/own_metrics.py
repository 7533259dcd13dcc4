"""The governor's own Prometheus metrics, and the HTTP endpoint that serves them.

Metrics live in a registry per daemon (not prometheus-client's global one) so that several
governors can run in one test process. Later parts of the engine add their counters here.

Four gauges show state the daemon keeps outside the metrics (quarantines and pending proposals
in SQLite, freezes in files, the last reload's outcome): :func:`serve_metrics` reads them on the
event loop every :data:`REFRESH_S` through a :class:`StateReading`, because the stores'
connections belong to the loop, not to prometheus-client's serving thread. Counters cannot
stand in for them: a quarantine or a proposal outlives the process that counted it.
"""

from __future__ import annotations

import asyncio
import logging
import platform
from collections import Counter as Tally
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Info, start_http_server
from prometheus_client.process_collector import ProcessCollector

from daemon.core.clock import Clock
from daemon.core.version import __version__
from daemon.engine.runtime.supervisor import Readiness

log = logging.getLogger(__name__)

# How often the state gauges are read again: a fraction of any sane scrape interval (15 s and
# up), and a few small SQLite queries and file reads cost nothing at that pace.
REFRESH_S = 5.0


@dataclass(frozen=True, slots=True)
class StateReading:
    """What the state gauges show, read by the daemon on its event loop.

    Attributes:
        targets: Every configured target: each gets a series, 0 when nothing applies to it.
        quarantined: The target of each quarantined (policy, target) pair.
        frozen: The targets a freeze (their own or the global one) holds now.
        pending: The target of each proposal waiting for a person.
        reload_ok: False while the last reload was rejected (a later good one clears it).
    """

    targets: tuple[str, ...]
    quarantined: tuple[str, ...]
    frozen: tuple[str, ...]
    pending: tuple[str, ...]
    reload_ok: bool


@dataclass(frozen=True, slots=True)
class OwnMetrics:
    """Handles to every metric the governor exports about itself."""

    registry: CollectorRegistry
    config_reloads: Counter
    config_loaded_timestamp: Gauge
    ready: Gauge
    last_reload_successful: Gauge
    quarantines: Gauge
    frozen: Gauge
    proposals_pending: Gauge

    def show(self, reading: StateReading) -> None:
        """Set the state gauges from ``reading``; a target no longer configured loses its series.

        A quarantine or proposal of a target removed from the configuration still counts:
        it is still in the state database, and still needs a person.
        """
        self.last_reload_successful.set(1 if reading.reload_ok else 0)
        for gauge, hits in (
            (self.quarantines, reading.quarantined),
            (self.proposals_pending, reading.pending),
            (self.frozen, reading.frozen),
        ):
            counts = Tally(hits)
            gauge.clear()
            for target in (*reading.targets, *sorted(set(counts) - set(reading.targets))):
                gauge.labels(target=target).set(counts[target])


def create_own_metrics(clock: Clock) -> OwnMetrics:
    """Build the registry with build info, uptime, process and reload metrics."""
    registry = CollectorRegistry()
    ProcessCollector(namespace="vllm_governor", registry=registry)
    Info("vllm_governor_build", "Version of the governor and its Python.", registry=registry).info(
        {"version": __version__, "python": platform.python_version()}
    )
    started = clock.monotonic()
    uptime = Gauge(
        "vllm_governor_uptime_seconds", "Seconds since the daemon started.", registry=registry
    )
    uptime.set_function(lambda: clock.monotonic() - started)
    reloads = Counter(
        "vllm_governor_config_reloads",
        "Reloads of the configuration (SIGHUP) and of changed policy files, by outcome.",
        ["outcome"],
        registry=registry,
    )
    for outcome in ("applied", "rejected"):
        reloads.labels(outcome=outcome)
    loaded = Gauge(
        "vllm_governor_config_loaded_timestamp_seconds",
        "Wall-clock time at which the configuration in force was loaded.",
        registry=registry,
    )
    loaded.set(clock.wall().timestamp())
    ready = Gauge(
        "vllm_governor_ready", "1 once every task of the daemon is ready.", registry=registry
    )
    reload_ok = Gauge(
        "vllm_governor_config_last_reload_successful",
        "0 while the last reload was rejected: the files on disk are not what runs.",
        registry=registry,
    )
    reload_ok.set(1)  # the configuration the daemon started with was loaded
    return OwnMetrics(
        registry,
        reloads,
        loaded,
        ready,
        reload_ok,
        quarantines=_per_target(
            registry,
            "vllm_governor_quarantines",
            "Policies quarantined on each target after a reverted change, until people lift them.",
        ),
        frozen=_per_target(
            registry,
            "vllm_governor_frozen",
            "1 while a freeze (the target's own or the global one) holds the target's changes.",
        ),
        proposals_pending=_per_target(
            registry,
            "vllm_governor_proposals_pending",
            "Proposals for each target waiting for a person's decision.",
        ),
    )


def _per_target(registry: CollectorRegistry, name: str, documentation: str) -> Gauge:
    return Gauge(name, documentation, ["target"], registry=registry)


async def serve_metrics(
    metrics: OwnMetrics,
    host: str,
    port: int,
    readiness: Readiness,
    read_state: Callable[[], StateReading],
) -> None:
    """Serve ``/metrics`` on ``host:port`` until cancelled; refresh the state gauges meanwhile.

    prometheus-client's own threaded WSGI server does the serving: it is maintained, small, and
    keeps a web framework out of an idle daemon's memory.
    """
    _refresh(metrics, read_state)  # the first scrape already sees them
    server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    try:
        log.info(
            "metrics endpoint listening",
            extra={"address": f"http://{host}:{server.server_port}/metrics"},
        )
        readiness.started()
        while True:  # serve until cancelled
            await asyncio.sleep(REFRESH_S)
            _refresh(metrics, read_state)
    finally:
        await asyncio.to_thread(server.shutdown)
        server.server_close()
        thread.join()


def _refresh(metrics: OwnMetrics, read_state: Callable[[], StateReading]) -> None:
    """Show a fresh reading; when none can be made, no series rather than stale ones."""
    try:
        reading = read_state()
    except Exception:
        # The state database busy or broken must not take the endpoint down with it.
        log.exception("reading the state for the metrics failed; its gauges are left empty")
        for gauge in (metrics.quarantines, metrics.frozen, metrics.proposals_pending):
            gauge.clear()
        return
    metrics.show(reading)
