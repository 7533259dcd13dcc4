"""Recorded ticks as the governor's signal feed and clock: the evaluator looks when it looked then.

:class:`RecordedFeed` is the backtest's adapter of the evaluator's
:class:`~daemon.engine.evaluation.signal_feed.SignalFeed` port: each evaluation sees one
recorded tick's views (fresh signals, knob values as recorded), and the next evaluation is due
at the next tick's recorded moment on the loop's virtual clock. :class:`RecordedClock` is the
governor's clock over it: the loop's seconds, and at each tick the wall-clock time recorded with
it (schedules and freeze expiries read it).

The recorded monotonic clock is made to run forward across daemon restarts: a recording may
span restarts of the daemon or of the host, and where the monotonic clock goes back (a reboot),
the wall clock's advance stands in for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from daemon.app.backtest.recording import RecordedTick
from daemon.engine.runtime.supervisor import EternalTask
from daemon.policy.evaluate import TargetView
from daemon.sources.declarations import SignalRegistry
from daemon.whatif.errors import WhatIfError
from daemon.whatif.series_snapshot import SeriesSnapshot


def moments(ticks: Sequence[RecordedTick]) -> list[float]:
    """Each tick's moment: seconds since the first one, on a clock that never goes back."""
    result: list[float] = []
    for index, tick in enumerate(ticks):
        if index == 0:
            result.append(0.0)
            continue
        previous = ticks[index - 1]
        step = tick.monotonic - previous.monotonic
        if step < 0:
            step = max(0.0, (tick.wall - previous.wall).total_seconds())
        result.append(result[-1] + step)
    return result


class RecordedFeed:
    """The recording, one tick per evaluation, at the recorded moments (loop time 0: the first).

    Args:
        ticks: The recorded ticks, in order (at least one).
    """

    def __init__(self, ticks: Sequence[RecordedTick]) -> None:
        self.ticks = tuple(ticks)
        self.moments = moments(self.ticks)
        self.index = 0
        self.finished = asyncio.Event()

    @property
    def tick(self) -> RecordedTick:
        """The tick the governor is at (the last one evaluated, or the first)."""
        return self.ticks[self.index]

    def views(
        self,
        targets: Sequence[str],
        knobs: Mapping[str, Mapping[str, float]],
        signals: SignalRegistry,
    ) -> dict[str, TargetView]:
        """The tick's views as recorded: every recorded target, its knob values as recorded.

        A backtest shows decisions, not their consequences: what a server would have done after
        a would-have change is not known, so its knobs keep their recorded values.
        """
        del targets, knobs, signals  # recorded as the daemon's evaluator built them
        return dict(self.tick.views)

    def knobs(self, target: str) -> Mapping[str, float]:
        """The knob values recorded for ``target`` at this tick (empty when not recorded)."""
        view = self.tick.views.get(target)
        return {} if view is None else view.knobs

    async def next_evaluation(self, interval_s: float) -> None:
        """Wait for the next tick's moment; after the last one, say so and wait for good."""
        del interval_s  # the recording says when the daemon evaluated
        if self.index + 1 >= len(self.ticks):
            self.finished.set()
            await asyncio.Event().wait()  # the backtest stops the governor
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, self.moments[self.index + 1] - loop.time()))
        self.index += 1

    def tasks(self) -> list[EternalTask]:
        """None: the recording needs no source."""
        return []

    def series(self, target: str, since: float, names: Iterable[str]) -> SeriesSnapshot:
        """None: a recording holds the policies' views, not the series a what-if reads.

        Raises:
            WhatIfError: always, naming the series: the tune round is reported as blocked with
                it (``cannot tune: the recording lacks ...``), and the replay goes on.
        """
        del since
        message = (
            f"cannot tune: the recording lacks the series a what-if round reads for {target}"
            f" ({', '.join(names)}); it holds the signals the policies saw and the knobs"
        )
        raise WhatIfError(message)


class RecordedClock:
    """The governor's clock in a backtest: the loop's seconds, and the recorded wall clock.

    Args:
        loop: The virtual-time loop the governor runs on.
        feed: The recording, whose current tick says what time it was.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, feed: RecordedFeed) -> None:
        self._loop = loop
        self._feed = feed

    def monotonic(self) -> float:
        """The loop's seconds: the first tick is at 0."""
        return self._loop.time()

    def wall(self) -> datetime:
        """The current tick's recorded wall-clock time, plus the seconds since it."""
        since = self._loop.time() - self._feed.moments[self._feed.index]
        return self._feed.tick.wall + timedelta(seconds=since)
