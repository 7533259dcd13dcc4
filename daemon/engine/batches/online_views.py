"""Views with the governor's own batch traffic taken out (:mod:`daemon.policy.online_signals`).

Every view the policies read passes through here: the evaluator's, the approvals' re-check,
the batch lane steerer's. The rates are taken over the same window as the views' own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from daemon.core.clock import Clock
from daemon.engine.batches.lanes import BatchLanes
from daemon.engine.runtime.supervisor import EternalTask
from daemon.policy.evaluate import TargetView
from daemon.policy.online_signals import online_signals
from daemon.sources.declarations import SignalRegistry
from daemon.whatif.series_snapshot import SeriesSnapshot


def online_views(
    views: Mapping[str, TargetView], lanes: BatchLanes, window_s: float, now: float
) -> dict[str, TargetView]:
    """Each view, its signals online only, with the ``batch_*`` signals added."""
    return {
        target: replace(
            view, signals=online_signals(view.signals, lanes.lane(target).traffic(window_s, now))
        )
        for target, view in views.items()
    }


class _Feed(Protocol):
    """The evaluator's signal feed, as :class:`OnlineFeed` wraps it."""

    def views(
        self,
        targets: Sequence[str],
        knobs: Mapping[str, Mapping[str, float]],
        signals: SignalRegistry,
    ) -> dict[str, TargetView]: ...

    async def next_evaluation(self, interval_s: float) -> None: ...

    def tasks(self) -> list[EternalTask]: ...

    def series(self, target: str, since: float, names: Iterable[str]) -> SeriesSnapshot: ...


class OnlineFeed:
    """A signal feed whose views are online only: the batch lanes' traffic taken out."""

    def __init__(
        self, inner: _Feed, lanes: BatchLanes, window_s: Callable[[], float], clock: Clock
    ) -> None:
        self._inner = inner
        self._lanes = lanes
        self._window_s = window_s
        self._clock = clock

    def views(
        self,
        targets: Sequence[str],
        knobs: Mapping[str, Mapping[str, float]],
        signals: SignalRegistry,
    ) -> dict[str, TargetView]:
        """The inner feed's views, online only."""
        views = self._inner.views(targets, knobs, signals)
        return online_views(views, self._lanes, self._window_s(), self._clock.monotonic())

    async def next_evaluation(self, interval_s: float) -> None:
        """As the inner feed paces it."""
        await self._inner.next_evaluation(interval_s)

    def tasks(self) -> list[EternalTask]:
        """The inner feed's tasks."""
        return self._inner.tasks()

    def series(self, target: str, since: float, names: Iterable[str]) -> SeriesSnapshot:
        """The inner feed's series (a what-if's; the lanes' traffic is in them, as in vLLM's)."""
        return self._inner.series(target, since, names)
