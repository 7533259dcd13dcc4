"""The evaluator's views compute the signals their readers read (issue 15, finding 10).

A view computed every catalogue signal of every server at each evaluation, every quantile of
every histogram included, while the policies read a few: a fifth of the daemon's CPU with four
live servers. The plane below is the daemon's own, its store filled with three scrapes of a
real vLLM page; what the view reads of the store is counted.
"""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client import CollectorRegistry

from daemon.api import VllmInstance
from daemon.core.settings import (
    GovernorConfig,
    HostSourceSection,
    NvmlSourceSection,
    SourcesSection,
)
from daemon.engine.evaluation.signal_feed import LiveFeed
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.sources.registry import BUILTIN
from daemon.sources.samples import SeriesKey
from daemon.sources.store import Point
from daemon.sources.vllm_metrics import parse_vllm_metrics
from tests.unit.sources.vllm_pages import V0_33

NOW = 100.0


class StillClock:
    """The loop's clock at ``NOW``."""

    def monotonic(self) -> float:
        return NOW

    def wall(self) -> datetime:
        return datetime.fromtimestamp(NOW, UTC)


def _plane() -> tuple[SignalPlane, list[int]]:
    """The daemon's signal plane over three scrapes of one server, and its windows read."""
    config = GovernorConfig(
        vllm=(VllmInstance(name="main", url="http://127.0.0.1:1"),),
        sources=SourcesSection(
            nvml=NvmlSourceSection(enabled=False), host=HostSourceSection(enabled=False)
        ),
    )
    plane = SignalPlane(config, StillClock(), CollectorRegistry())
    windows = [0]
    points = plane.store.points

    def counted(key: SeriesKey, since: float = float("-inf")) -> list[Point]:
        windows[0] += 1
        return points(key, since)

    plane.store.points = counted  # type: ignore[method-assign]
    for at in (40.0, 70.0, NOW):
        plane.store.add(
            parse_vllm_metrics(V0_33, instance="main", at=at, source="vllm/main").samples
        )
    return plane, windows


def test_a_view_computes_the_signals_read_and_no_quantile_nobody_reads() -> None:
    plane, windows = _plane()
    view = LiveFeed(plane, lambda: frozenset({"running", "kv_usage"})).views(["main"], {}, BUILTIN)[
        "main"
    ]
    assert {"running", "kv_usage"} <= view.signals.keys()
    assert "preemptions_per_s" not in view.signals
    assert windows[0] == 0  # was every bucket of every histogram, for every quantile and rate


def test_a_view_for_every_reader_computes_every_signal() -> None:
    plane, windows = _plane()
    view = LiveFeed(plane).views(["main"], {}, BUILTIN)["main"]
    assert {"running", "kv_usage", "preemptions_per_s"} <= view.signals.keys()
    assert windows[0] > 0
