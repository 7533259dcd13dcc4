"""Injected time: engine code never calls ``time.time()`` or ``time.monotonic()`` itself.

Durations (timeouts, ``for``, cooldowns) read :meth:`Clock.monotonic`, which follows the event
loop's clock so that tests can move it; calendars (schedules, expiry shown to people) read
:meth:`Clock.wall`.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """A source of time for the engine."""

    def monotonic(self) -> float:
        """Seconds on a monotonic clock, for durations only."""
        ...

    def wall(self) -> datetime:
        """The current wall-clock time, timezone-aware, for calendars and records."""
        ...


class SystemClock:
    """The real clock: the running event loop's time for durations, UTC for calendars."""

    def monotonic(self) -> float:
        """The running loop's clock, or the process's monotonic clock outside a loop."""
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    def wall(self) -> datetime:
        """Now, in UTC."""
        return datetime.now(UTC)
