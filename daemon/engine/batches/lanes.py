"""The batch lane of each target: how many batch requests may be in vLLM at once, now.

A job's workers take a place in their target's lane before each request (:meth:`Lane.room`,
then :meth:`Lane.start` with no ``await`` between the two, so no other worker can slip in).
The lane's width is set from outside (:mod:`.lane_steerer`, from the batch policies):

* widening lets waiting workers in at once;
* narrowing cancels the newest requests in flight beyond the new width (they have done the
  least work), so that online traffic gets its room back within a look, not after the longest
  batch request; their lines go back to pending and are sent again later (their results are
  still written once: :mod:`.job_runner`);
* width 0 closes the lane: nothing is in flight and workers wait;
* a spacing paces it: at least ``spacing_s`` (on the loop's clock) between two starts, so that
  requests freed together (several ending in one engine step, a lane widened by more than one)
  do not put their prefills into one step: the step every online request arriving then waits
  for (docs/batch.md, "What inflates online TTFT").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from daemon.batch.own_traffic import OwnTraffic, TrafficTally

T = TypeVar("T")


class Lane:
    """One target's batch lane."""

    def __init__(
        self,
        target: str,
        width: int = 0,
        reason: str = "not decided yet",
        *,
        piece_tokens: Callable[[], int] = lambda: 0,
    ) -> None:
        self.target = target
        self._piece_tokens = piece_tokens
        self.width = width
        self.reason = reason
        self.policy: str | None = None
        # vLLM's priority for the lane's requests; None: send none (the server runs fcfs).
        self.priority: int | None = None
        self.scheduling = "unknown"
        self._in_flight: list[asyncio.Task[Any]] = []  # oldest first
        self._room = asyncio.Event()
        self.spacing_s = 0.0
        self._last_start: float | None = None  # the loop's time of the last start
        self.narrowed = 0  # requests cancelled by narrowing, since start
        self.tally = TrafficTally()  # the answers, for the online signals
        self._piece_slots: asyncio.Semaphore | None = None

    def piece_slots(self, slots: int) -> asyncio.Semaphore:
        """The lane's slots for prefill pieces (made at the first ask, shared by its jobs)."""
        if self._piece_slots is None:
            self._piece_slots = asyncio.Semaphore(slots)
        return self._piece_slots

    @property
    def in_flight(self) -> int:
        """Batch requests in flight on the target now."""
        return len(self._in_flight)

    def set(
        self, width: int, reason: str, policy: str | None = None, spacing_s: float = 0.0
    ) -> None:
        """Make the lane ``width`` wide; cancel the newest requests beyond it.

        Only requests still running count: one that has ended (its callback not run yet) or
        is being cancelled already leaves its place to the next, not one more cut.
        ``spacing_s`` is the least time between two starts from now on.
        """
        self.width, self.reason, self.policy = max(0, width), reason, policy
        self.spacing_s = max(0.0, spacing_s)
        running = [task for task in self._in_flight if not task.done() and not task.cancelling()]
        for task in running[self.width :]:
            task.cancel()
            self.narrowed += 1
        self._room.set()

    async def room(self) -> None:
        """Wait until one more request fits in the lane and its spacing has passed."""
        loop = asyncio.get_running_loop()
        while True:
            if len(self._in_flight) >= self.width:
                self._room.clear()
                await self._room.wait()
                continue
            # Looked at again after the sleep: another worker may have started meanwhile,
            # or the lane narrowed.
            due = 0.0 if self._last_start is None else self._last_start + self.spacing_s
            if loop.time() >= due:
                return
            await asyncio.sleep(due - loop.time())

    def start(self, request: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        """Run ``request`` in the lane (call right after :meth:`room`, with no await between)."""
        self._last_start = asyncio.get_running_loop().time()
        task = asyncio.create_task(request, name=name)
        self._in_flight.append(task)
        task.add_done_callback(self._left)
        return task

    async def close_and_wait(self, reason: str) -> None:
        """Close the lane and wait until no request of it is in flight any more."""
        self.set(0, reason)
        tasks = list(self._in_flight)
        if tasks:
            await asyncio.wait(tasks)

    def traffic(self, window_s: float, now: float) -> OwnTraffic:
        """The governor's batch traffic on the target now, and over the window ending now."""
        return self.tally.over(window_s, now, self.in_flight, self._piece_tokens())

    def status(self) -> dict[str, Any]:
        """The lane as ``batch status`` shows it."""
        return {
            "width": self.width,
            "in_flight": self.in_flight,
            "policy": self.policy,
            "reason": self.reason,
            "narrowed": self.narrowed,
            "start_spacing_s": self.spacing_s,
            "priority": self.priority,
            "scheduling": self.scheduling,
        }

    def _left(self, task: asyncio.Task[Any]) -> None:
        self._in_flight.remove(task)
        self._room.set()


class BatchLanes:
    """Every target's lane, made on first use (closed until it is steered).

    Args:
        piece_tokens: ``[batch] prefill_piece_tokens`` in force (the lanes' policies read it).
    """

    def __init__(self, piece_tokens: Callable[[], int] = lambda: 0) -> None:
        self._lanes: dict[str, Lane] = {}
        self._piece_tokens = piece_tokens

    def lane(self, target: str) -> Lane:
        """The lane of ``target``."""
        lane = self._lanes.get(target)
        if lane is None:
            lane = self._lanes[target] = Lane(target, piece_tokens=self._piece_tokens)
        return lane

    async def hold(self, target: str) -> str:
        """Close ``target``'s lane and wait for its requests in flight (before a restart).

        The lane stays closed while the change is in flight (the steerer sees its journal
        entry open) and opens again, as the policies say, once the change is finished.
        """
        lane = self.lane(target)
        stopped = lane.in_flight
        if lane.width == 0 and stopped == 0:
            return ""
        await lane.close_and_wait(f"a restart of {target} is coming: closed until it is done")
        return f"batch lane closed, {stopped} batch request(s) stopped (sent again later)"

    def status(self) -> dict[str, dict[str, Any]]:
        """Each lane, by target."""
        return {target: lane.status() for target, lane in sorted(self._lanes.items())}
