"""Simulated time in a real-time server: the event loop's clock, 1:1, from the server's start.

The engine model never reads a clock (:mod:`simulator.engine`); in the server every time it
is given is ``LoopClock.now()``: loop seconds since the server became ready. The loop clock
is monotonic, so a wall-clock jump (NTP, suspend) does not stretch a simulated step.
"""

from __future__ import annotations

import asyncio
from typing import Protocol


class SimulatedNow(Protocol):
    """Anything that tells the engine's time: the loop clock here, a virtual run elsewhere."""

    def now(self) -> float:
        """Simulated seconds now."""
        ...


class LoopClock:
    """Seconds since creation on the running loop's monotonic clock.

    Args:
        loop: The loop whose clock to read.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._origin = loop.time()

    def now(self) -> float:
        """Simulated seconds now."""
        return self._loop.time() - self._origin

    async def sleep_until(self, at: float) -> None:
        """Sleep until simulated time ``at``; yield to the loop even when it has passed."""
        await asyncio.sleep(max(0.0, at - self.now()))
