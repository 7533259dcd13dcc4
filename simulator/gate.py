"""The admission gate in front of the engine: a cap and a FIFO queue with a timeout.

It models what HAProxy does with a server's ``maxconn`` and ``timeout queue``
(``examples/haproxy/haproxy.cfg``): at most ``cap`` requests are inside the engine at once;
the others wait in arrival order; one still waiting ``queue_timeout_s`` after it arrived gets
a 503 and never reaches the engine. The cap can change at any time without a restart: a raise
lets waiting requests in at once, a cut lets no new one in until enough of those inside have
finished (nothing inside is touched). The gate knows nothing of the engine: a driver tells it
when requests arrive and when those it let in end (:mod:`simulator.virtual_time` does)::

    if gate.arrive(item, now):            # True: in now; False: queued
        forward(item)
    ...
    gate.release()                        # one request let in has ended
    for waiting in gate.expire(now):      # past their deadline: 503 at waiting.deadline
        refuse(waiting)
    for waiting in gate.admit(now):       # in, after waiting now - waiting.arrived_at
        forward(waiting.item)

For reports, :func:`waited_record` adds the wait to what the engine recorded (queue time
counts in TTFT, as a client sees it) and :func:`timeout_record` is the record of a 503: a
rejection, an SLO miss, never a win.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from simulator.arrivals import Arrival
from simulator.requests import FinishedRequest, Outcome, RejectReason

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Waiting(Generic[T]):
    """One request waiting at the gate.

    Attributes:
        item: What the driver queued (an arrival).
        arrived_at: When it reached the gate.
        deadline: When it gets a 503 if it is still waiting.
    """

    item: T
    arrived_at: float
    deadline: float


class Gate(Generic[T]):
    """A cap and a FIFO queue with a timeout.

    Args:
        cap: Most requests inside the engine at once (at least 1).
        queue_timeout_s: Longest wait before a 503 (``math.inf``: none).
    """

    def __init__(self, cap: int, queue_timeout_s: float) -> None:
        if not queue_timeout_s > 0:
            message = f"the queue timeout must be positive, not {queue_timeout_s}"
            raise ValueError(message)
        self._cap = _checked(cap)
        self.queue_timeout_s = queue_timeout_s
        self.in_flight = 0
        self._queue: deque[Waiting[T]] = deque()
        self.admitted = 0
        self.timed_out = 0
        # HAProxy's ``set server ... state drain``: nothing new goes in; those inside finish.
        self.draining = False

    @property
    def cap(self) -> int:
        """The cap in force."""
        return self._cap

    @property
    def queued(self) -> int:
        """Requests waiting (some may be past their deadline until :meth:`expire`)."""
        return len(self._queue)

    def set_cap(self, cap: int) -> None:
        """Change the cap live; call :meth:`admit` next, as a raise may let requests in."""
        self._cap = _checked(cap)

    def arrive(self, item: T, now: float) -> bool:
        """A request arrives: True when it goes in at once, False when it waits.

        First come, first served: it goes in only if nobody waits and the cap allows. Calls
        come in time order (a later ``now`` never precedes an earlier one).
        """
        if self._queue and now < self._queue[-1].arrived_at:
            message = "arrive() went back in time"
            raise RuntimeError(message)
        if not self._queue and not self.draining and self.in_flight < self._cap:
            self.in_flight += 1
            self.admitted += 1
            return True
        self._queue.append(Waiting(item, now, now + self.queue_timeout_s))
        return False

    def release(self) -> None:
        """A request that went in has ended (completed, aborted or refused by the engine)."""
        if self.in_flight <= 0:
            message = "release() without a request inside the gate"
            raise RuntimeError(message)
        self.in_flight -= 1

    def expire(self, now: float) -> list[Waiting[T]]:
        """Remove and return the waiting requests whose deadline is at or before ``now``.

        Requests arrive in time order and share one timeout, so deadlines are in queue order:
        only the head is ever looked at.
        """
        expired = []
        while self._queue and self._queue[0].deadline <= now:
            expired.append(self._queue.popleft())
        self.timed_out += len(expired)
        return expired

    def admit(self, now: float) -> list[Waiting[T]]:
        """Let in the head of the queue while the cap allows; call :meth:`expire` first."""
        admitted: list[Waiting[T]] = []
        if self.draining:
            return admitted
        while self._queue and self.in_flight < self._cap:
            waiting = self._queue.popleft()
            if waiting.deadline <= now:
                message = "admit() found an expired request: call expire() first"
                raise RuntimeError(message)
            admitted.append(waiting)
            self.in_flight += 1
        self.admitted += len(admitted)
        return admitted

    @property
    def next_deadline(self) -> float:
        """When the oldest waiting request times out (``math.inf`` when none waits)."""
        return self._queue[0].deadline if self._queue else math.inf


def waited_record(record: FinishedRequest, waited_s: float) -> FinishedRequest:
    """``record`` as the client saw it, having first waited ``waited_s`` at the gate."""
    if waited_s == 0:
        return record

    def plus(value: float | None) -> float | None:
        return None if value is None else value + waited_s

    return replace(
        record,
        arrived_at=record.arrived_at - waited_s,
        queue_time_s=plus(record.queue_time_s),
        ttft_s=plus(record.ttft_s),
        e2e_s=plus(record.e2e_s),
    )


def timeout_record(request_id: str, waiting: Waiting[Arrival]) -> FinishedRequest:
    """The record of a request the gate refused with a 503 when its wait ran out."""
    arrival = waiting.item
    return FinishedRequest(
        request_id=request_id,
        arrived_at=waiting.arrived_at,
        finished_at=waiting.deadline,
        prompt_tokens=arrival.prompt_tokens,
        output_tokens=0,
        outcome=Outcome.REJECTED,
        reject_reason=RejectReason.QUEUE_TIMEOUT,
        e2e_s=waiting.deadline - waiting.arrived_at,
        priority=arrival.priority,
    )


def _checked(cap: int) -> int:
    if cap < 1:
        message = f"the gate's cap must be at least 1, not {cap}"
        raise ValueError(message)
    return cap
