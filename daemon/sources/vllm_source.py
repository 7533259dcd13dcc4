"""The vLLM source: ``/health``, ``/version`` and ``/metrics`` of one configured instance.

States, as an operator reads them: a refused connection is ``starting`` (vLLM refuses until
its engine is built, which takes minutes, so it is not "dead"); a 503 on ``/health`` is
``unhealthy`` (the engine died); anything else that answers is up. ``/health`` is shallow (200
even when the scheduler is stuck), so policies should also look at the metrics themselves.
"""

from __future__ import annotations

import json
from typing import Self

from daemon.core.errors import MetricsParseError, SourceUnavailable
from daemon.sources.catalogue import catalogue_declarations
from daemon.sources.http_get import HttpAnswer, http_get
from daemon.sources.polling import PollResult
from daemon.sources.samples import Sample, SeriesKey, labels_of
from daemon.sources.vllm_metrics import parse_vllm_metrics

# What policies read of each vLLM server, per target (see daemon.sources.catalogue).
DECLARATIONS = catalogue_declarations("vllm")


class VllmSource:
    """Polls one vLLM server."""

    def __init__(self, instance: str, base_url: str, interval_s: float, timeout_s: float) -> None:
        self.instance = instance
        self.name = f"vllm/{instance}"
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._base_url = base_url.rstrip("/")
        self.version: str | None = None

    async def __aenter__(self) -> Self:
        """Nothing to open: every poll is a fresh request."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Nothing to close."""

    async def poll(self, now: float) -> PollResult:
        """Read health, then metrics; learn the version on the first answer after an outage."""
        health = await self._get("/health", "starting")
        healthy = health.status == 200
        if self.version is None:
            self.version = await self._read_version()
        metrics = await self._get("/metrics", "starting")
        if metrics.status != 200:
            message = f"{self._base_url}/metrics answered HTTP {metrics.status}"
            raise MetricsParseError(message, detail="no-metrics")
        scrape = parse_vllm_metrics(
            metrics.body.decode("utf-8", errors="replace"),
            instance=self.instance,
            at=now,
            source=self.name,
        )
        labels = labels_of({"instance": self.instance})
        extra = [
            Sample(SeriesKey("vllm_health_ok", labels), 1.0 if healthy else 0.0, now, self.name)
        ]
        if self.version:
            version_labels = labels_of({"instance": self.instance, "version": self.version})
            extra.append(
                Sample(SeriesKey("vllm_version_info", version_labels), 1.0, now, self.name)
            )
        return PollResult((*scrape.samples, *extra), "" if healthy else "unhealthy")

    async def _get(self, path: str, refused_detail: str) -> HttpAnswer:
        try:
            answer = await http_get(self._base_url + path, self.timeout_s)
        except SourceUnavailable as exc:
            if exc.detail == "refused":
                self.version = None  # whatever comes back may be another version
                raise SourceUnavailable(str(exc), detail=refused_detail) from exc
            raise
        return answer

    async def _read_version(self) -> str | None:
        answer = await self._get("/version", "starting")
        if answer.status != 200:
            return None
        try:
            version = json.loads(answer.body).get("version")
        except (ValueError, AttributeError):
            return None
        return version if isinstance(version, str) else None
