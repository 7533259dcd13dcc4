"""The real-time driver: one task that runs the engine's steps on the loop's clock.

Each turn starts a step (``engine.begin_step``), sleeps until the step's ``ends_at`` and ends
it (``engine.end_step``), handing the tokens to the HTTP handlers that wait for them. With
nothing to compute it awaits a submission (or the next lifecycle transition), so an idle
server costs no CPU.

Simulated time is loop time (:mod:`simulator.server.clock`). Sleeping overshoots by up to a
millisecond (epoll's resolution), which at 6 ms steps would cost a sixth of the throughput;
so a step that follows another starts at the previous one's ``ends_at``, not when the loop
got round to it, and the engine keeps to the model's schedule as long as the process keeps
up. It never starts a step before the newest arrival (a request must not be scheduled before
it arrived), nor more than ``MAX_LAG_S`` behind the loop clock: past that, the process is too
slow for the load, and the schedule gives the time up rather than compute in a burst
(counted in ``given_up_s`` and logged).

Aborts (a client went away) arrive while a step is in flight; the engine takes them only
between steps, so they wait for the step's end.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from collections.abc import Callable, Sequence

from simulator.engine import Engine, Phase
from simulator.requests import FinishedRequest, Outcome, RejectReason, Request
from simulator.server.clock import LoopClock
from simulator.server.metrics import VllmMetrics
from simulator.server.request_log import request_line
from simulator.server.tickets import Ticket

MAX_LAG_S = 0.25
_LAG_LOG_INTERVAL_S = 10.0

log = logging.getLogger(__name__)


class RealTimeDriver:
    """Runs one engine in real time and connects it to its clients.

    Args:
        engine: The engine, serving.
        clock: The simulated clock (the engine was created at ``clock.now()``).
        metrics: Where steps and finished requests are recorded; None without metrics
            (``disable-log-stats``).
        log_requests: Write vLLM's line for each request taken (``--enable-log-requests`` at
            INFO, :mod:`simulator.server.request_log`).
    """

    def __init__(
        self,
        engine: Engine,
        clock: LoopClock,
        metrics: VllmMetrics | None,
        *,
        log_requests: bool = False,
    ) -> None:
        self.engine = engine
        self._log_requests = log_requests
        self.clock = clock
        self._metrics = metrics
        self._wake = asyncio.Event()
        self._stopped = asyncio.Event()
        self._tickets: dict[str, Ticket] = {}
        self._streaming: dict[Ticket, None] = {}
        self._pending_aborts: list[Request] = []
        self._rejections: dict[str, RejectReason | None] = {}
        self._previous_end = -math.inf
        self._last_arrival = -math.inf
        self._next_load_id = 0
        self._last_lag_log = -math.inf
        self.steps = 0
        self.busy_s = 0.0
        self.given_up_s = 0.0
        # Told of every request that ends, rejected ones included (``--summary``).
        self.on_finished: Callable[[FinishedRequest], None] | None = None

    # -- what clients and /metrics see -------------------------------------------------

    @property
    def accepting(self) -> bool:
        """Whether new requests are taken (not draining or stopped)."""
        return self.engine.accepting

    @property
    def stopped(self) -> bool:
        """Whether the engine has stopped for good (``/health`` says 503)."""
        return self.engine.phase is Phase.STOPPED

    # -- requests ----------------------------------------------------------------------

    def submit(
        self,
        prompt_tokens: int,
        max_tokens: int,
        *,
        streaming: bool,
        priority: int = 0,
        token_ids: Sequence[int] = (),
    ) -> Ticket | RejectReason:
        """A client's request arrives: its ticket, or why it was rejected at once.

        ``token_ids`` (its prompt's, where it had them) name its blocks for the prefix cache.
        """
        request_id = f"cmpl-{uuid.uuid4().hex}"
        request = self._submit(prompt_tokens, max_tokens, request_id, priority, token_ids)
        if isinstance(request, RejectReason):
            return request
        ticket = Ticket(request, streaming)
        self._tickets[request_id] = ticket
        if streaming:
            self._streaming[ticket] = None
        return ticket

    def submit_load(
        self, prompt_tokens: int, max_tokens: int, priority: int = 0, *, request_id: str = ""
    ) -> RejectReason | None:
        """A request of the replayed workload arrives; None when taken, else why not.

        ``request_id`` names it for whoever follows it to its record (the gate); by default
        the driver numbers the load's requests itself.
        """
        if not request_id:
            self._next_load_id += 1
            request_id = f"load-{self._next_load_id}"
        request = self._submit(prompt_tokens, max_tokens, request_id, priority)
        return request if isinstance(request, RejectReason) else None

    def abort(self, ticket: Ticket) -> None:
        """The client went away: abort its request (at the end of the step in flight)."""
        if ticket.record is not None:
            return
        scheduler = self.engine.scheduler
        if scheduler is not None and scheduler.in_step:
            self._pending_aborts.append(ticket.request)
            return
        self.engine.abort(ticket.request, self.clock.now())
        self._collect()

    def _submit(
        self,
        prompt_tokens: int,
        max_tokens: int,
        request_id: str,
        priority: int = 0,
        token_ids: Sequence[int] = (),
    ) -> Request | RejectReason:
        now = self.clock.now()
        request = self.engine.submit(
            prompt_tokens, max_tokens, now, request_id, priority=priority, token_ids=token_ids
        )
        if request is None:
            self._rejections[request_id] = None
            self._collect()
            return self._rejections.pop(request_id) or RejectReason.UNAVAILABLE
        self._last_arrival = now
        self._wake.set()
        if self._log_requests:
            log.info("%s", request_line(request_id, prompt_tokens, max_tokens))
        return request

    # -- lifecycle ---------------------------------------------------------------------

    async def shutdown(self) -> None:
        """SIGTERM: drain for up to ``shutdown-timeout`` s (abort at once with 0), then stop."""
        if self.engine.phase is Phase.SERVING:
            self.engine.shutdown(self.clock.now())
            self._wake.set()
        await self._stopped.wait()

    async def run(self) -> None:
        """Run steps until the engine has stopped for good."""
        engine = self.engine
        try:
            while True:
                now = self.clock.now()
                engine.advance(now)
                self._apply_aborts(now)
                if engine.phase is Phase.STOPPED:
                    break
                start = self._step_start(now)
                plan = engine.begin_step(start) if engine.has_work else None
                if plan is None:
                    await self._idle()
                    continue
                await self.clock.sleep_until(plan.ends_at)
                result = engine.end_step()
                self._previous_end = plan.ends_at
                self.steps += 1
                self.busy_s += plan.duration_s
                if self._metrics is not None:
                    self._metrics.observe_step(result)
                self._deliver()
                self._collect()
            self._collect()
        finally:
            self._stopped.set()

    def _step_start(self, now: float) -> float:
        """When the next step starts: on schedule, unless that is more than MAX_LAG_S ago."""
        scheduled = max(self._previous_end, self._last_arrival)
        floor = now - MAX_LAG_S
        if scheduled >= floor:
            return scheduled
        if self.engine.has_work:
            # Work is waiting and neither the last step's end nor an arrival is recent: the
            # process could not keep up with the model.
            self.given_up_s += floor - scheduled
            if now - self._last_lag_log >= _LAG_LOG_INTERVAL_S:
                self._last_lag_log = now
                log.warning(
                    "fell %.3f s behind the model's step schedule; giving the time up "
                    "(the CPU is too slow for this load)",
                    now - scheduled,
                )
        return floor

    async def _idle(self) -> None:
        """Wait for a submission or the engine's next transition; no polling."""
        self._wake.clear()
        transition = self.engine.next_transition_at
        timeout = None if transition is None else max(0.0, transition - self.clock.now())
        try:
            async with asyncio.timeout(timeout):
                await self._wake.wait()
        except TimeoutError:
            pass

    def _apply_aborts(self, now: float) -> None:
        if not self._pending_aborts:
            return
        for request in self._pending_aborts:
            self.engine.abort(request, now)
        self._pending_aborts.clear()
        self._collect()

    def _deliver(self) -> None:
        """Tell every streaming client how many tokens it has now."""
        engine = self.engine
        for ticket in self._streaming:
            ticket.progress(engine.generated_tokens(ticket.request))

    def _collect(self) -> None:
        """Hand ended requests to their tickets and the metrics."""
        metrics = self._metrics
        for record in self.engine.take_finished():
            if self.on_finished is not None:
                self.on_finished(record)
            request_id = record.request_id
            if record.outcome is Outcome.REJECTED:
                if request_id in self._rejections:
                    self._rejections[request_id] = record.reject_reason
                continue
            ticket = self._tickets.pop(request_id, None)
            # A client's max_tokens is a cap it hit ("length"); a replayed request's output
            # length is where the model stopped by itself ("stop").
            reason = record.finished_reason or "abort"
            if ticket is not None and record.outcome is Outcome.COMPLETED:
                reason = "length"
            if metrics is not None:
                metrics.observe_finished(record, reason)
            if ticket is not None:
                self._streaming.pop(ticket, None)
                ticket.finish(record)
