"""The governor's own Prometheus metrics, and the HTTP endpoint that serves them.

Metrics live in a registry per daemon (not prometheus-client's global one) so that several
governors can run in one test process. Later parts of the engine add their counters here.
"""

from __future__ import annotations

import asyncio
import logging
import platform
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Info, start_http_server
from prometheus_client.process_collector import ProcessCollector

from daemon.core.clock import Clock
from daemon.core.version import __version__
from daemon.engine.supervisor import Readiness

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OwnMetrics:
    """Handles to every metric the governor exports about itself."""

    registry: CollectorRegistry
    config_reloads: Counter
    config_loaded_timestamp: Gauge
    ready: Gauge


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
    return OwnMetrics(registry, reloads, loaded, ready)


async def serve_metrics(metrics: OwnMetrics, host: str, port: int, readiness: Readiness) -> None:
    """Serve ``/metrics`` on ``host:port`` until cancelled.

    prometheus-client's own threaded WSGI server does the serving: it is maintained, small, and
    keeps a web framework out of an idle daemon's memory.
    """
    server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    try:
        log.info(
            "metrics endpoint listening",
            extra={"address": f"http://{host}:{server.server_port}/metrics"},
        )
        readiness.started()
        await asyncio.Event().wait()  # serve until cancelled
    finally:
        await asyncio.to_thread(server.shutdown)
        server.server_close()
        thread.join()
