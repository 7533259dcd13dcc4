"""The signal plane: the store, the health of every source, and one polling task per source.

Built from the configuration at start; a reload replaces the sources whose settings changed
(:class:`~daemon.engine.evaluation.source_set.SourceSet`). The sources report ready once each
has made its first attempt, whatever the outcome, so that the evaluator starts with a first
picture: a vLLM still loading is a known state ("starting"), not a reason to delay the daemon.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric

from daemon.core.backoff import Backoff
from daemon.core.clock import Clock
from daemon.core.secrets import GovernorSecrets, load_secrets
from daemon.core.settings import GovernorConfig
from daemon.engine.evaluation.source_set import SourceSet
from daemon.engine.runtime.supervisor import EternalTask, Readiness
from daemon.sources import mqtt_signals, prometheus_signals
from daemon.sources.declarations import SignalDeclaration
from daemon.sources.health import HealthBoard, SourceState
from daemon.sources.kinds import SOURCE_KINDS, SourceKind, planned_sources
from daemon.sources.polling import PollingRunner, PollingSource
from daemon.sources.samples import SeriesKey
from daemon.sources.store import SignalStore
from daemon.sources.view import SignalRow, ViewContext, signal_rows

if TYPE_CHECKING:
    from daemon.sources.mqtt.publisher import MqttPublisher
    from daemon.sources.mqtt.source import MqttSource

log = logging.getLogger(__name__)

# For series whose source is unknown (none today): as strict as the strictest default.
_DEFAULT_STALE_AFTER_S = 10.0
# A failing source is retried at most this many of its intervals apart (10 s for a vLLM
# scraped every 2 s, its default stale_after_s), instead of Backoff's minute.
BACKOFF_INTERVALS = 5.0


@dataclass(frozen=True, slots=True)
class _SourceMetrics:
    polls: Counter


class _SourceUp:
    """``vllm_governor_source_up`` from the sources' health: polling ones and MQTT alike."""

    def __init__(self, health: HealthBoard) -> None:
        self._health = health

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "vllm_governor_source_up",
            "1 when the source's last attempt succeeded (a poll; MQTT: connected).",
            labels=["source"],
        )
        for health in self._health.all():
            up.add_metric([health.source], 1.0 if health.state is SourceState.UP else 0.0)
        yield up


class SignalPlane:
    """Owns the signal store and runs the sources that fill it.

    The polling sources are those that ``kinds`` (the table of source kinds) builds from the
    configuration, at start and on each reload.
    """

    def __init__(
        self,
        config: GovernorConfig,
        clock: Clock,
        registry: CollectorRegistry,
        window_s: float | None = None,
        secrets: GovernorSecrets | None = None,
        *,
        kinds: Sequence[SourceKind] = SOURCE_KINDS,
    ) -> None:
        self._clock = clock
        self._kinds = kinds
        bounds = config.signals
        self.store = SignalStore(
            points_per_series=bounds.points_per_series,
            max_series=bounds.max_series,
            max_series_per_source=bounds.max_series_per_source,
            forget_after_s=bounds.forget_after_s,
        )
        log.info(
            "signal store bounded",
            extra={
                "max_series": bounds.max_series,
                "max_series_per_source": bounds.max_series_per_source,
                "points_per_series": bounds.points_per_series,
                "memory_budget_mib": round(self.store.memory_budget_bytes / 2**20, 1),
            },
        )
        self.health = HealthBoard()
        plan = planned_sources(config, kinds)
        self._stale_after = {planned.source.name: planned.stale_after_s for planned in plan}
        self._sources = SourceSet(plan, self._run_source, self.store, self.health)
        self._mqtt: MqttSource | None = None
        self.publisher: MqttPublisher | None = None
        mqtt = config.sources.mqtt
        if mqtt.enabled:
            # Imported only when configured: aiomqtt/paho and prometheus-api-client (requests)
            # cost an idle daemon about 12 MB of memory.
            from daemon.engine.evaluation.mqtt_wiring import broker_of, mqtt_publisher, mqtt_source  # noqa: PLC0415

            broker = broker_of(mqtt, secrets or load_secrets())
            self._mqtt = mqtt_source(mqtt, broker)
            self.publisher = mqtt_publisher(mqtt, broker, clock)
            self._stale_after["mqtt"] = mqtt.stale_after_s
        self._declared = _configured_declarations(config)
        self._window_s = window_s or config.signals.window_s
        # vLLM instances only: the catalogue's signals are theirs, not a live service's.
        self._targets = tuple(instance.name for instance in config.vllm)
        self._metrics = _register_metrics(registry, self.store)
        registry.register(_SourceUp(self.health))

    def tasks(self) -> list[EternalTask]:
        """The polling sources, the MQTT subscriber and publisher when configured."""
        tasks = [EternalTask("signal sources", self._run_sources)]
        if self._mqtt is not None:
            tasks.append(EternalTask("mqtt subscriber", self._run_mqtt))
        if self.publisher is not None:
            tasks.append(EternalTask("mqtt publisher", self._run_publisher))
        return tasks

    async def _run_mqtt(self, readiness: Readiness) -> None:
        assert self._mqtt is not None
        await self._mqtt.run(self.store, self.health, self._clock, readiness.started)

    async def _run_publisher(self, readiness: Readiness) -> None:
        assert self.publisher is not None
        await self.publisher.run(readiness.started)

    def reload(self, config: GovernorConfig) -> None:
        """Scrape what ``config`` says from now on: changed sources restart, others go on.

        The store's bounds, the MQTT connection and the gates stay as they were started
        (:mod:`daemon.core.reload_scope` refuses a reload that changes them).
        """
        plan = planned_sources(config, self._kinds)
        mqtt = {"mqtt": self._stale_after["mqtt"]} if "mqtt" in self._stale_after else {}
        self._stale_after = {p.source.name: p.stale_after_s for p in plan} | mqtt
        self._declared = _configured_declarations(config)
        self._sources.replace(plan)

    async def _run_sources(self, readiness: Readiness) -> None:
        await self._sources.run(readiness.started)

    async def _run_source(self, source: PollingSource, started: Callable[[], None]) -> None:
        # A source that fails backs off, but never so far that its signals stay stale for long:
        # a vLLM that answers slowly under load is exactly when the governor must keep looking.
        backoff = Backoff(cap_s=BACKOFF_INTERVALS * source.interval_s)
        runner = PollingRunner(
            source, self.store, self.health, self._clock, backoff=backoff, on_poll=self._count
        )
        await runner.run(started)

    def _count(self, source: str, ok: bool) -> None:
        self._metrics.polls.labels(source=source, outcome="ok" if ok else "failed").inc()

    def rows(
        self,
        prefix: str = "",
        window_s: float | None = None,
        only: frozenset[str] | None = None,
        *,
        others_too: bool = False,
    ) -> list[SignalRow]:
        """What the governor sees now: every signal whose name starts with ``prefix``.

        Derived signals cover ``window_s`` (default: the configured ``signals.window_s``);
        ``only`` limits the rows to those catalogue signals (computing nothing else), with
        ``others_too`` the other sources' series as well.
        """
        context = ViewContext(
            now=self._clock.monotonic(),
            window_s=window_s or self._window_s,
            stale_after=self._stale_after_key,
            targets=self._targets,
            declared=self._declared,
            only=only,
            others_too=others_too,
        )
        return [row for row in signal_rows(self.store, context) if row.name.startswith(prefix)]

    def _stale_after_key(self, key: SeriesKey) -> float:
        return self.stale_after(self.store.source_of(key) or "")

    def stale_after(self, source: str) -> float:
        """Age beyond which a sample of ``source`` no longer counts."""
        return self._stale_after.get(source, _DEFAULT_STALE_AFTER_S)

    def source_status(self) -> list[dict[str, Any]]:
        """Health of every source, for ``vllm-governor status``."""
        now = self._clock.monotonic()
        return [
            {
                "source": health.source,
                "state": health.state.value,
                "detail": health.detail,
                "for_s": round(now - health.since, 1),
                "last_error": health.last_error,
            }
            for health in self.health.all()
        ]


def _configured_declarations(config: GovernorConfig) -> tuple[SignalDeclaration, ...]:
    """The signals of the enabled Prometheus and MQTT sources, shown before their first value."""
    prometheus, mqtt = config.sources.prometheus, config.sources.mqtt
    return (
        *(prometheus_signals.declarations(prometheus) if prometheus.enabled else ()),
        *(mqtt_signals.declarations(mqtt) if mqtt.enabled else ()),
    )


def _register_metrics(registry: CollectorRegistry, store: SignalStore) -> _SourceMetrics:
    polls = Counter(
        "vllm_governor_source_polls",
        "Polls of each source by outcome.",
        ["source", "outcome"],
        registry=registry,
    )
    Gauge(
        "vllm_governor_signal_series", "Series held in the signal store.", registry=registry
    ).set_function(lambda: store.series_count)
    Gauge(
        "vllm_governor_signal_samples_dropped",
        "Samples dropped by the store's bounds: a source's quota, the store's, a key too large.",
        registry=registry,
    ).set_function(lambda: store.dropped_samples)
    Gauge(
        "vllm_governor_signal_series_evicted",
        "Series forgotten: absent for signals.forget_after_s, or making room for a smaller source.",
        registry=registry,
    ).set_function(lambda: store.evicted_series)

    return _SourceMetrics(polls)
