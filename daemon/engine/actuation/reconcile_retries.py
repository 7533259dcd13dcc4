"""A reconcile that cannot finish now is tried again on a schedule, not at the next start.

A reconcile refused leaves the change open at the step the journal says (the vLLM actuator's
defers for want of a restart slot of its group: finishing would restart or verify a server
while the group's budget is spent); the instance takes no other change until it is finished.
The running governor tries it again after a delay that doubles from ``base_s`` up to
``cap_s``, drawn with jitter (:class:`~daemon.core.backoff.Backoff`: governors deferred by
the same busy slot do not retry in step), for as long as it stays deferred; each try waits
for a slot as a change does (``slot_wait_s``). Status lists what waits, why, how often it was
tried and when it is tried next.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from daemon.core.actuation import REFUSED, ActuationResult
from daemon.core.backoff import Backoff
from daemon.core.clock import Clock

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetryDelays:
    """How long a deferred reconcile waits before each new try.

    Attributes:
        base_s: Bound of the first delay.
        cap_s: Bound of every delay: a deferred reconcile is tried at least this often.
        rng: The jitter's random source (seeded in tests).
    """

    base_s: float = 10.0
    cap_s: float = 120.0
    rng: random.Random = field(default_factory=random.Random, compare=False)


DEFAULT_RETRY_DELAYS = RetryDelays()


@dataclass(frozen=True, slots=True)
class DeferredReconcile:
    """A reconcile that waits for its next try.

    Attributes:
        target: The instance.
        entry: The journal entry left open.
        reason: Why the last try was deferred (the actuator's words).
        tries: How many tries were deferred so far (the one at start included).
        next_at: When it is tried next (wall clock).
    """

    target: str
    entry: int | None
    reason: str
    tries: int
    next_at: datetime

    def to_status(self) -> dict[str, Any]:
        """The deferral as status shows it."""
        return {
            "target": self.target,
            "entry": self.entry,
            "reason": self.reason,
            "tries": self.tries,
            "next_at": self.next_at.isoformat(),
        }


Reconcile = Callable[[], Awaitable[ActuationResult | None]]


class ReconcileRetries:
    """The deferred reconciles of one kind's targets, and their schedule.

    Args:
        clock: The injected clock (next tries shown on the wall clock).
        delays: The schedule.
    """

    def __init__(self, clock: Clock, delays: RetryDelays) -> None:
        self._clock = clock
        self._delays = delays
        self._waiting: dict[str, DeferredReconcile] = {}

    def deferred(self) -> list[DeferredReconcile]:
        """The reconciles waiting for their next try, by target."""
        return [self._waiting[name] for name in sorted(self._waiting)]

    @staticmethod
    def is_deferred(result: ActuationResult | None) -> bool:
        """Whether a reconcile's result leaves its change open for a later try."""
        return result is not None and result.state == REFUSED

    async def until_finished(
        self, target: str, result: ActuationResult, reconcile: Reconcile
    ) -> ActuationResult | None:
        """Try ``reconcile`` again, after each delay, until it is no longer deferred.

        ``result`` is the deferred try that came before. Returns the last try's result.
        """
        backoff = Backoff(self._delays.base_s, self._delays.cap_s, self._delays.rng)
        last: ActuationResult | None = result
        tries = 1
        try:
            while last is not None and self.is_deferred(last):
                delay = backoff.next_delay()
                self._waiting[target] = DeferredReconcile(
                    target,
                    last.entry_id,
                    last.outcome,
                    tries,
                    self._clock.wall() + timedelta(seconds=delay),
                )
                log.info(
                    "reconcile deferred: tried again later",
                    extra={"target": target, "tries": tries, "delay_s": round(delay, 1)},
                )
                await asyncio.sleep(delay)
                last = await reconcile()
                tries += 1
        finally:
            self._waiting.pop(target, None)
        return last
