"""The vLLM source: ``/health``, ``/version`` and ``/metrics`` of one configured instance.

States, as an operator reads them: a refused connection is ``starting`` (vLLM refuses until
its engine is built, which takes minutes, so it is not "dead"); a 503 on ``/health`` is
``unhealthy`` (the engine died); anything else that answers is up. ``/health`` is shallow (200
even when the scheduler is stuck), so policies should also look at the metrics themselves.

A page beyond the target's :class:`PageLimits` fails the poll (the source shows as down, with
the reason); within them it is parsed a slice at a time, so one target's huge page never holds
the event loop that every other target, the control socket and the watchdog share.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Self

from daemon.core.errors import MetricsParseError, SourceUnavailable
from daemon.core.http_client import HttpResponse
from daemon.core.http_keepalive import KeptAliveExchanges
from daemon.sources.catalogue import catalogue_declarations
from daemon.sources.http_get import http_get
from daemon.sources.metric_pages import PageLimits
from daemon.sources.page_shapes import PageMemo
from daemon.sources.polling import PlannedSource, PollResult
from daemon.sources.samples import Sample, SeriesKey, labels_of
from daemon.sources.vllm_metrics import VllmPagePlan, parse_vllm_metrics_gently

if TYPE_CHECKING:
    from daemon.core.settings import GovernorConfig

# What policies read of each vLLM server, per target (see daemon.sources.catalogue).
DECLARATIONS = catalogue_declarations("vllm")
# /health and /version answer a few bytes; more is not a vLLM.
SMALL_ANSWER_BYTES = 64 << 10


class VllmSource:
    """Polls one vLLM server."""

    def __init__(
        self,
        instance: str,
        base_url: str,
        interval_s: float,
        timeout_s: float,
        limits: PageLimits | None = None,
    ) -> None:
        self.instance = instance
        self.name = f"vllm/{instance}"
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._base_url = base_url.rstrip("/")
        self._limits = limits or PageLimits()
        # The server's page keeps its shape from one scrape to the next: read by its numbers.
        self._memo = PageMemo[VllmPagePlan]()
        # One connection to the server, kept from one request and one poll to the next.
        self._exchanges = KeptAliveExchanges()
        self.version: str | None = None

    async def __aenter__(self) -> Self:
        """Nothing to open: the first request opens the connection."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the connection kept to the server."""
        self._exchanges.close()

    async def poll(self, now: float) -> PollResult:
        """Read metrics, then health; learn the version on the first answer after an outage.

        ``/metrics`` comes first and ``/health`` gets half the time limit: a real vLLM 0.32
        under load answers ``/metrics`` at once but holds ``/health`` for seconds while its
        engine is busy (seen: 5.7 s), and the metrics must not be lost to that. A health check
        that takes longer says nothing this time (no sample), never "unhealthy".
        """
        metrics = await self._get("/metrics", "starting", self.timeout_s, self._limits.max_bytes)
        healthy = await self._healthy()
        if self.version is None:
            self.version = await self._read_version()
        if metrics.status != 200:
            message = f"{self._base_url}/metrics answered HTTP {metrics.status}"
            raise MetricsParseError(message, detail="no-metrics")
        scrape = await parse_vllm_metrics_gently(
            metrics.body.decode("utf-8", errors="replace"),
            instance=self.instance,
            at=now,
            source=self.name,
            limits=self._limits,
            memo=self._memo,
        )
        labels = labels_of({"instance": self.instance})
        extra = []
        if healthy is not None:
            health_key = SeriesKey("vllm_health_ok", labels)
            extra.append(Sample(health_key, 1.0 if healthy else 0.0, now, self.name))
        if self.version:
            version_labels = labels_of({"instance": self.instance, "version": self.version})
            extra.append(
                Sample(SeriesKey("vllm_version_info", version_labels), 1.0, now, self.name)
            )
        detail = {True: "", False: "unhealthy", None: "health check slow"}[healthy]
        return PollResult(tuple(extra), detail, scrape.columns)

    async def _healthy(self) -> bool | None:
        """Whether ``/health`` answers 200; None when it takes more than half the time limit.

        A check that has not answered by then is ended (its connection closed), so a server
        that holds ``/health`` costs one connection for that long at each poll, and no more.
        """
        try:
            health = await self._get("/health", "starting", self.timeout_s / 2)
        except SourceUnavailable as exc:
            if exc.detail == "starting":
                raise
            return None
        return health.status == 200

    async def _get(
        self,
        path: str,
        refused_detail: str,
        timeout_s: float,
        max_bytes: int = SMALL_ANSWER_BYTES,
    ) -> HttpResponse:
        try:
            answer = await http_get(self._base_url + path, timeout_s, max_bytes, self._exchanges)
        except SourceUnavailable as exc:
            if exc.detail == "refused":
                self.version = None  # whatever comes back may be another version
                raise SourceUnavailable(str(exc), detail=refused_detail) from exc
            raise
        return answer

    async def _read_version(self) -> str | None:
        answer = await self._get("/version", "starting", self.timeout_s)
        if answer.status != 200:
            return None
        try:
            version = json.loads(answer.body).get("version")
        except (ValueError, AttributeError):
            return None
        return version if isinstance(version, str) else None


def planned_sources(config: GovernorConfig) -> Iterator[PlannedSource]:
    """One source per ``[[vllm]]`` server, restarted when its URL, timing or page limits change."""
    for instance in config.vllm:
        limits = PageLimits(
            max_bytes=instance.max_page_bytes,
            max_samples=instance.max_page_samples,
            max_label_values=instance.max_label_values,
        )
        vllm = VllmSource(
            instance.name,
            instance.url,
            instance.scrape_interval_s,
            instance.scrape_timeout_s,
            limits,
        )
        built_from = (instance.url, instance.scrape_interval_s, instance.scrape_timeout_s, limits)
        yield PlannedSource(vllm, instance.stale_after_s, built_from)
