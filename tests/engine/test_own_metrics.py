"""The state gauges of the governor's own metrics: quarantines, freezes, proposals, reloads.

They show state kept outside the metrics (SQLite, freeze files), read on the event loop every
``REFRESH_S``; the endpoint itself is prometheus-client's, served on a real loopback port.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.request
from datetime import UTC, datetime

import pytest

from daemon.engine.runtime import own_metrics
from daemon.engine.runtime.own_metrics import (
    OwnMetrics,
    StateReading,
    create_own_metrics,
    serve_metrics,
)
from daemon.engine.runtime.supervisor import Readiness
from tests.support.services import free_port


class _Clock:
    def monotonic(self) -> float:
        return 100.0

    def wall(self) -> datetime:
        return datetime(2026, 5, 1, tzinfo=UTC)


def _value(metrics: OwnMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def _reading(**changes: object) -> StateReading:
    fields: dict[str, object] = {
        "targets": ("main", "spare"),
        "quarantined": (),
        "frozen": (),
        "pending": (),
        "reload_ok": True,
    }
    fields.update(changes)
    return StateReading(**fields)  # type: ignore[arg-type]


def test_every_target_has_a_series_and_counts_what_applies_to_it() -> None:
    metrics = create_own_metrics(_Clock())
    metrics.show(
        _reading(quarantined=("main", "main"), frozen=("spare",), pending=("main", "gone"))
    )
    assert _value(metrics, "vllm_governor_quarantines", target="main") == 2
    assert _value(metrics, "vllm_governor_quarantines", target="spare") == 0
    assert _value(metrics, "vllm_governor_frozen", target="main") == 0
    assert _value(metrics, "vllm_governor_frozen", target="spare") == 1
    assert _value(metrics, "vllm_governor_proposals_pending", target="main") == 1
    # A proposal for a target no longer configured still waits for a person: it still counts.
    assert _value(metrics, "vllm_governor_proposals_pending", target="gone") == 1
    assert _value(metrics, "vllm_governor_config_last_reload_successful") == 1


def test_a_target_removed_from_the_configuration_loses_its_series() -> None:
    metrics = create_own_metrics(_Clock())
    metrics.show(_reading(frozen=("spare",)))
    metrics.show(_reading(targets=("main",), reload_ok=False))
    assert _value(metrics, "vllm_governor_frozen", target="spare") is None
    assert _value(metrics, "vllm_governor_frozen", target="main") == 0
    assert _value(metrics, "vllm_governor_config_last_reload_successful") == 0


def _scrape(port: int) -> str:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text: str = answer.read().decode()
        return text


@pytest.mark.asyncio
async def test_the_endpoint_serves_a_fresh_reading_and_empty_gauges_when_none_can_be_made(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(own_metrics, "REFRESH_S", 0.01)
    metrics = create_own_metrics(_Clock())
    readings: list[StateReading | Exception] = [_reading(frozen=("main",))]

    def read_state() -> StateReading:
        reading = readings[-1]
        if isinstance(reading, Exception):
            raise reading
        return reading

    port = free_port()
    readiness = Readiness()
    task = asyncio.create_task(serve_metrics(metrics, "127.0.0.1", port, readiness, read_state))
    try:
        await asyncio.wait_for(readiness.wait(), 5)
        # Read before the endpoint answers its first scrape.
        assert 'vllm_governor_frozen{target="main"} 1.0' in await asyncio.to_thread(_scrape, port)

        readings.append(_reading(pending=("spare",)))
        await asyncio.sleep(0.1)
        page = await asyncio.to_thread(_scrape, port)
        assert 'vllm_governor_frozen{target="main"} 0.0' in page
        assert 'vllm_governor_proposals_pending{target="spare"} 1.0' in page

        readings.append(RuntimeError("database is locked"))
        with caplog.at_level(logging.ERROR, logger=own_metrics.__name__):
            await asyncio.sleep(0.1)
        page = await asyncio.to_thread(_scrape, port)
        # No series rather than stale ones; the endpoint still serves.
        assert "vllm_governor_frozen{" not in page
        assert "vllm_governor_proposals_pending{" not in page
        assert "reading the state for the metrics failed" in caplog.text
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
