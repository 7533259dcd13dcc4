"""A simulated run scraped as the daemon scrapes vLLM: page text, real parser, real store.

The engine runs in virtual time; every ``interval_s`` its ``/metrics`` page is rendered by the
simulated server's own collector (:class:`simulator.server.metrics.VllmMetrics`), parsed by the
vLLM source's parser and added to a :class:`~daemon.sources.store.SignalStore`, stamped with
the virtual time. What the what-if reads is then exactly what a daemon watching ``sim serve``
would have stored.

With a :class:`~simulator.gate.Gate` in front of the engine, each scrape also stores what the
HAProxy source reads of it (:mod:`daemon.sources.haproxy_source`'s names and labels, as
:mod:`simulator.server.virtual_haproxy` shows the gate to it): the backend's 5xx (the gate's
503s), the server's 5xx (none: vLLM's errors are its own), the queue and the cap.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, generate_latest

from daemon.sources.samples import Sample, SeriesKey, labels_of
from daemon.sources.store import SignalStore
from daemon.sources.vllm_metrics import parse_vllm_metrics
from simulator.arrivals import Arrival
from simulator.engine import Engine
from simulator.gate import Gate
from simulator.profiles import EngineProfile
from simulator.requests import FinishedRequest
from simulator.server.metrics import VllmMetrics
from simulator.settings import EngineSettings
from simulator.steps import StepResult
from simulator.virtual_time import VirtualRun

INSTANCE = "main"


class _Observer:
    def __init__(self, run_now: list[float]) -> None:
        self._now = run_now
        self.metrics: VllmMetrics | None = None

    def now(self) -> float:
        return self._now[0]

    def step(self, result: StepResult) -> None:
        assert self.metrics is not None
        self.metrics.observe_step(result)

    def finished(self, record: FinishedRequest) -> None:
        assert self.metrics is not None
        self.metrics.observe_finished(record, record.finished_reason or "abort")


def scraped_store(
    profile: EngineProfile,
    settings: EngineSettings,
    arrivals: Sequence[Arrival],
    duration_s: float,
    *,
    interval_s: float = 2.0,
    gate: Gate[Arrival] | None = None,
) -> SignalStore:
    """The store after scraping the run every ``interval_s`` until ``duration_s``."""
    now = [0.0]
    observer = _Observer(now)
    engine = Engine(profile, settings)
    observer.metrics = VllmMetrics(engine, observer, created=0.0)
    registry = CollectorRegistry()
    registry.register(observer.metrics)
    run = VirtualRun(engine, arrivals, observer=observer, gate=gate)
    store = SignalStore(points_per_series=4096)
    at = 0.0
    while at < duration_s:
        at += interval_s
        run.run_until(at)
        now[0] = at
        page = generate_latest(registry).decode()
        scrape = parse_vllm_metrics(page, instance=INSTANCE, at=at, source=f"vllm/{INSTANCE}")
        store.add(scrape.samples)
        if gate is not None:
            store.add(_gate_samples(gate, at))
    return store


def _gate_samples(gate: Gate[Arrival], at: float) -> list[Sample]:
    source = f"haproxy-{INSTANCE}"
    backend = labels_of({"backend": "vllm", "instance": INSTANCE})
    server = labels_of({"backend": "vllm", "server": "main", "instance": INSTANCE})
    return [
        Sample(SeriesKey("haproxy_backend_http_5xx_total", backend), gate.timed_out, at, source),
        Sample(SeriesKey("haproxy_http_5xx_total", server), 0.0, at, source),
        Sample(SeriesKey("haproxy_queue_current", server), gate.queued, at, source),
        Sample(SeriesKey("haproxy_server_maxconn", server), gate.cap, at, source),
    ]
