"""The waiting queue of the simulated scheduler, in vLLM's two scheduling policies.

vLLM 0.33 (``vllm/v1/core/sched/request_queue.py``) builds the waiting queue from
``--scheduling-policy``:

- ``fcfs`` (the default): a deque. New requests join the back; a preempted request goes back
  to the front (``prepend_request``), so it is the next one admitted. A request's
  ``priority`` is carried but never looked at.
- ``priority``: a heap ordered by ``Request.__lt__`` (``vllm/v1/request.py``): the lower
  ``priority`` first, then the earlier ``arrival_time``, then the smaller ``request_id``. There
  is no front: a preempted request goes back to its place in that order.

Both queues offer the same small interface, so the scheduler never asks which one it holds.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from typing import Protocol

from simulator.requests import Request
from simulator.settings import SchedulingPolicy


class WaitingQueue(Protocol):
    """What the scheduler does with its waiting requests."""

    def add(self, request: Request) -> None:
        """A new request arrives."""
        ...

    def prepend(self, request: Request) -> None:
        """A preempted request comes back."""
        ...

    def peek(self) -> Request:
        """The request the scheduler tries to admit next."""
        ...

    def pop(self) -> Request:
        """Take the request :meth:`peek` returns."""
        ...

    def remove(self, request: Request) -> None:
        """Take one request out, wherever it is (an abort)."""
        ...

    def clear(self) -> None:
        """Empty the queue."""
        ...

    def __len__(self) -> int:
        """Requests waiting."""
        ...

    def __contains__(self, request: object) -> bool:
        """Whether ``request`` waits here."""
        ...

    def __iter__(self) -> Iterator[Request]:
        """The requests in the order they would be admitted."""
        ...


class FcfsQueue:
    """First come, first served; preempted requests go to the front."""

    __slots__ = ("_requests",)

    def __init__(self) -> None:
        self._requests: deque[Request] = deque()

    def add(self, request: Request) -> None:
        """Join the back."""
        self._requests.append(request)

    def prepend(self, request: Request) -> None:
        """Go to the front."""
        self._requests.appendleft(request)

    def peek(self) -> Request:
        """The front."""
        return self._requests[0]

    def pop(self) -> Request:
        """Take the front."""
        return self._requests.popleft()

    def remove(self, request: Request) -> None:
        """Take ``request`` out."""
        self._requests.remove(request)

    def clear(self) -> None:
        """Empty the queue."""
        self._requests.clear()

    def __len__(self) -> int:
        """Requests waiting."""
        return len(self._requests)

    def __contains__(self, request: object) -> bool:
        """Whether ``request`` waits here."""
        return request in self._requests

    def __iter__(self) -> Iterator[Request]:
        """Front to back."""
        return iter(self._requests)


# (priority, arrived_at, request_id, insertion number, request): the fields of vLLM's
# Request.__lt__, then the insertion number where vLLM falls back to id(), so that the
# request itself is never compared.
_Entry = tuple[int, float, str, int, Request]


class PriorityQueue:
    """Lowest ``priority`` first, then earliest arrival, then smallest request id."""

    __slots__ = ("_heap", "_inserted")

    def __init__(self) -> None:
        self._heap: list[_Entry] = []
        self._inserted = 0

    def add(self, request: Request) -> None:
        """Take its place in the order."""
        self._inserted += 1
        entry = (request.priority, request.arrived_at, request.request_id, self._inserted, request)
        heapq.heappush(self._heap, entry)

    def prepend(self, request: Request) -> None:
        """A preempted request has no front to go to: it takes its place in the order."""
        self.add(request)

    def peek(self) -> Request:
        """The first in the order."""
        return self._heap[0][-1]

    def pop(self) -> Request:
        """Take the first in the order."""
        return heapq.heappop(self._heap)[-1]

    def remove(self, request: Request) -> None:
        """Take ``request`` out (a linear search, as vLLM's ``remove_request``)."""
        self._heap = [entry for entry in self._heap if entry[-1] is not request]
        heapq.heapify(self._heap)

    def clear(self) -> None:
        """Empty the queue."""
        self._heap.clear()

    def __len__(self) -> int:
        """Requests waiting."""
        return len(self._heap)

    def __contains__(self, request: object) -> bool:
        """Whether ``request`` waits here."""
        return any(entry[-1] is request for entry in self._heap)

    def __iter__(self) -> Iterator[Request]:
        """In the order they would be admitted."""
        return (entry[-1] for entry in sorted(self._heap, key=lambda entry: entry[:4]))


def waiting_queue(policy: SchedulingPolicy) -> WaitingQueue:
    """The waiting queue vLLM builds for ``policy`` (``create_request_queue``)."""
    if policy == SchedulingPolicy.PRIORITY:
        return PriorityQueue()
    return FcfsQueue()
