"""The signal feed: the evaluator's port for what the policies see, and when they look.

The daemon's feed is the :class:`~daemon.engine.evaluation.signal_plane.SignalPlane`
(:class:`LiveFeed`): its sources fill the store, each evaluation builds one view per target
from the rows, and evaluations follow ``evaluation_interval_s`` on the loop's clock. A backtest
plugs in recorded views instead, evaluated at the recorded moments; the rest of the governor
(tick, planner, router, actuation, approvals) is the same.

The tuner's what-if rounds read their raw series (request counters, token histograms) through
the same port (:meth:`SignalFeed.series`): the daemon's from its store; a recording, which
holds the views and not those series, says what it lacks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.runtime.supervisor import EternalTask
from daemon.policy.evaluate import TargetView
from daemon.policy.views import target_views
from daemon.sources.declarations import SignalRegistry
from daemon.whatif.series_snapshot import SeriesSnapshot, snapshot


class SignalFeed(Protocol):
    """What the evaluator and the approvals' re-check see, and the pace of evaluations."""

    def views(
        self,
        targets: Sequence[str],
        knobs: Mapping[str, Mapping[str, float]],
        signals: SignalRegistry,
    ) -> dict[str, TargetView]:
        """One view per target now: signals of the ``signals`` registry, the ``knobs`` known."""
        ...

    async def next_evaluation(self, interval_s: float) -> None:
        """Wait until the next evaluation is due (``interval_s`` is the configured pace)."""
        ...

    def tasks(self) -> list[EternalTask]:
        """The eternal tasks that keep the feed fed (the sources), run by the supervisor."""
        ...

    def series(self, target: str, since: float, names: Iterable[str]) -> SeriesSnapshot:
        """A copy of ``target``'s series ``names`` since ``since``, for a what-if round.

        Raises:
            WhatIfError: the feed does not hold such series (a recording).
        """
        ...


class LiveFeed:
    """The daemon's feed: the signal plane's current rows, evaluated every interval."""

    def __init__(
        self, plane: SignalPlane, reads: Callable[[], frozenset[str] | None] = lambda: None
    ) -> None:
        """Views of ``plane``'s rows, of the catalogue signals ``reads()`` names (None: all).

        A view's cost is its catalogue signals (each quantile reads a window of every bucket
        of its histogram, for every server): the daemon computes those its readers read, and
        every one only where a reader wants them all (the recorder).
        """
        self._plane = plane
        self._reads = reads

    def views(
        self,
        targets: Sequence[str],
        knobs: Mapping[str, Mapping[str, float]],
        signals: SignalRegistry,
    ) -> dict[str, TargetView]:
        """The views of the rows the sources have put in the store."""
        rows = self._plane.rows(only=self._reads(), others_too=True)
        return target_views(rows, targets, knobs, signals)

    async def next_evaluation(self, interval_s: float) -> None:
        """Sleep one interval on the loop's clock."""
        await asyncio.sleep(interval_s)

    def tasks(self) -> list[EternalTask]:
        """The polling sources, and MQTT's subscriber and publisher when configured."""
        return self._plane.tasks()

    def series(self, target: str, since: float, names: Iterable[str]) -> SeriesSnapshot:
        """The series as the sources scraped them into the store."""
        return snapshot(self._plane.store, target, since, names)
