"""The way in to the engine: what a request costs before the scheduler sees it.

In vLLM the API server parses each request, builds its engine request and hands it to the
engine core over IPC, one request at a time on one event loop; the first token then travels
back the same way. On a GPU host that is a few hundred microseconds on cores of its own, and
the shipped GPU profiles leave it out (both parameters 0: requests reach the scheduler the
moment they arrive). On a CPU-only host it is milliseconds, on the cores the model runs on,
and it shapes TTFT: a lone request waits for it, and a burst queues for it.

The model is a FIFO server with a constant delay behind it: request ``i`` reaches the
scheduler at ``max(arrival_i, done_{i-1}) + service`` plus ``latency``, where ``service`` is
the front end's serial work per request (``frontend_us_per_request``) and ``latency`` the
rest of the round trip that overlaps with other requests (``frontend_latency_us``: IPC hops,
the first token's way out). A request's arrival time stays its own, so the wait counts in
its queue time, TTFT and end-to-end latency, as a client measures them.
"""

from __future__ import annotations

from collections import deque

from simulator.requests import Request


class FrontEnd:
    """Requests on their way to the scheduler, in arrival order.

    Args:
        service_s: Serial work per request (s).
        latency_s: Constant delay after it (s).
    """

    def __init__(self, service_s: float, latency_s: float) -> None:
        self.service_s = service_s
        self.latency_s = latency_s
        self._busy_until = 0.0
        self._pending: deque[tuple[float, Request]] = deque()

    @property
    def active(self) -> bool:
        """Whether requests take any time on the way (else they go straight in)."""
        return self.service_s > 0 or self.latency_s > 0

    @property
    def pending(self) -> int:
        """Requests not yet handed to the scheduler."""
        return len(self._pending)

    @property
    def next_ready_at(self) -> float | None:
        """When the next request reaches the scheduler, or None when none is on its way."""
        return self._pending[0][0] if self._pending else None

    def enter(self, request: Request, now: float) -> float:
        """``request`` arrives at ``now``; return when it will reach the scheduler."""
        self._busy_until = max(now, self._busy_until) + self.service_s
        ready_at = self._busy_until + self.latency_s
        # A constant latency behind a FIFO server keeps the ready times in arrival order.
        self._pending.append((ready_at, request))
        return ready_at

    def due(self, now: float) -> list[tuple[float, Request]]:
        """Take the requests that have reached the scheduler by ``now``, with their times."""
        out = []
        while self._pending and self._pending[0][0] <= now:
            out.append(self._pending.popleft())
        return out

    def remove(self, request: Request) -> bool:
        """Take ``request`` off the way (its client went away); say whether it was on it."""
        for index, (_, pending) in enumerate(self._pending):
            if pending is request:
                del self._pending[index]
                return True
        return False

    def take_all(self) -> list[Request]:
        """Empty the way (shutdown); the requests in arrival order."""
        requests = [request for _, request in self._pending]
        self._pending.clear()
        return requests
