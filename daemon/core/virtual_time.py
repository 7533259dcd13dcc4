"""An asyncio event loop whose clock jumps over waits: hours of a daemon in seconds.

The governor's stages wait on the loop's clock (``asyncio.sleep``, ``asyncio.timeout``, call
later); the simulated vLLM of ``sim serve`` paces its engine on it too. Run them together on
a :class:`VirtualTimeLoop` and nothing needs to be copied or mocked to run them faster than
real time: whenever no callback is ready and no socket has anything to read, the loop's clock
moves straight to the next timer instead of sleeping.

Sockets stay real (a governor scraping an in-process server over loopback): the loop polls
them without waiting before each jump, and on loopback what one side sent is readable as soon
as the send returns. What the loop cannot see is work outside it: a thread or a subprocess
runs in real time while the clock jumps, so virtual-time runs keep such work out (its ports
are in-process there). The loop's own executor is kept out the same way: a blocking call handed
to it (``asyncio.to_thread``, ``loop.run_in_executor``) runs at once, inline, and takes no
virtual time, as a computation between two awaits does; in a thread, the clock would jump while
it ran, and what came back when would depend on the machine's load. A loop with nothing
scheduled at all waits for real IO, as any loop.

:class:`VirtualClock` is the governor's :class:`~daemon.core.clock.Clock` on that loop: its
monotonic seconds are the loop's, its wall clock a fixed start plus them.
"""

from __future__ import annotations

import asyncio
import math
import selectors
from collections.abc import Callable, Coroutine, Mapping
from contextvars import Context
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class _JumpingSelector(selectors.BaseSelector):
    """A real selector that never blocks while a timer is due: it moves the clock instead."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._real = selectors.DefaultSelector()
        self._loop = loop

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # nothing scheduled: only real IO can wake the loop
            return self._real.select(None)
        self._loop.advance(timeout)
        return []

    def close(self) -> None:
        self._real.close()

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop on virtual time, starting at 0."""

    def __init__(self) -> None:
        self._virtual_now = 0.0
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        """Virtual seconds since the loop was made."""
        return self._virtual_now

    def call_later(
        self,
        delay: float,
        callback: Callable[[*Ts], object],
        *args: *Ts,
        context: Context | None = None,
    ) -> asyncio.TimerHandle:
        """As asyncio's, but a positive delay is never lost to rounding.

        Real time moves by itself; virtual time only when a timer lies ahead. A delay below
        the clock's resolution at this hour (``now + delay == now``) would make a timer that
        fires without the clock moving, and a caller waiting for a moment still ahead (a
        step's end, computed in floating point) would sleep again, forever.
        """
        now = self.time()
        when = now + delay
        if delay > 0 and when <= now:
            when = math.nextafter(now, math.inf)
        return self.call_at(when, callback, *args, context=context)

    def run_in_executor(
        self, executor: Any, func: Callable[[*Ts], T], *args: *Ts
    ) -> asyncio.Future[T]:
        """Run ``func(*args)`` now, inline, and return its outcome as a done future.

        See the module's docstring: a thread would run in real time while the clock jumps.
        """
        future: asyncio.Future[T] = self.create_future()
        try:
            future.set_result(func(*args))
        except Exception as exc:  # the caller's await raises it, as from a thread
            future.set_exception(exc)
        return future

    def advance(self, seconds: float) -> None:
        """Move the clock to the next timer, ``seconds`` ahead (the selector does this).

        Exactly to the timer's moment, not ``now + seconds``: the sum can fall one rounding
        short of it, and the timer would then wait for another jump.
        """
        target = self._virtual_now + max(0.0, seconds)
        # asyncio's heap of timers (BaseEventLoop._scheduled), the earliest first.
        scheduled: list[asyncio.TimerHandle] = getattr(self, "_scheduled", [])
        if scheduled:
            target = max(target, scheduled[0].when())
        self._virtual_now = target


class VirtualClock:
    """The governor's clock on a :class:`VirtualTimeLoop`.

    Args:
        loop: The loop whose time is read.
        start: The wall-clock time at loop time 0.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, start: datetime) -> None:
        self._loop = loop
        self._start = start

    def monotonic(self) -> float:
        """The loop's seconds."""
        return self._loop.time()

    def wall(self) -> datetime:
        """``start`` plus the loop's seconds (timezone-aware, as the system clock's)."""
        return self._start + timedelta(seconds=self._loop.time())


def run_in_virtual_time(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a fresh :class:`VirtualTimeLoop`."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main)


EPOCH = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)  # a Monday morning: schedules have something to do
