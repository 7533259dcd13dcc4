"""A simulated vLLM server over its lifetime: serving, draining, down, restarted.

:class:`Engine` wraps one :class:`~simulator.scheduler.Scheduler` per incarnation. Like real
vLLM, a shutdown drains in-flight requests for up to ``shutdown_timeout`` seconds while
rejecting new ones, then aborts the rest; a restart then keeps the engine down for the
profile's restart time before it serves again with its new settings, counters back at zero.

The engine never reads a clock. A driver (virtual time in :mod:`simulator.virtual_time`, or a
real-time server) moves it::

    engine.submit(request_id, prompt_tokens, max_tokens, now)   # -> Request | None
    plan = engine.begin_step(now)                               # -> StepPlan | None
    ...wait until plan.ends_at...
    result = engine.end_step()                                  # tokens come out
    engine.advance(now)                # front end, drain deadline, end of a restart
    engine.next_transition_at          # when advance() next has something to do
    engine.restart(now, new_settings)  # or engine.shutdown(now)
    engine.abort(request, now)         # a client went away (between steps)
    engine.snapshot(now), engine.counters, engine.take_finished()
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from simulator.front_end import FrontEnd
from simulator.prefix_cache import block_names
from simulator.profiles import EngineProfile
from simulator.requests import FinishedRequest, Outcome, RejectReason, Request, finished_record
from simulator.scheduler import Scheduler
from simulator.settings import EngineSettings
from simulator.steps import EngineCounters, StepPlan, StepResult


class Phase(StrEnum):
    """Where the engine is in its lifecycle."""

    SERVING = "serving"
    DRAINING = "draining"  # shutting down: in-flight requests finish, new ones are rejected
    DOWN = "down"  # restarting: the port refuses connections
    STOPPED = "stopped"  # shut down for good


@dataclass(slots=True)
class LifetimeTotals:
    """Totals over every incarnation, for reports (``/metrics`` shows one incarnation's)."""

    preemptions: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_cache_hits: int = 0  # prompt tokens found cached: counted in prompt_tokens, not computed
    restarts: int = 0
    downtime_s: float = 0.0
    busy_s: float = 0.0  # seconds the engine spent in steps (the GPU busy)
    outcomes: dict[str, int] = field(default_factory=lambda: {o.value: 0 for o in Outcome})


@dataclass(frozen=True, slots=True)
class EngineSnapshot:
    """The engine's state at one instant, as a controller or a report samples it.

    Attributes:
        at: When (s, driver clock).
        phase: Lifecycle phase.
        settings: The settings in force (or coming, while down).
        num_running: Requests running.
        num_waiting: Requests waiting (preempted ones included).
        num_preempted_waiting: Waiting requests that were preempted.
        kv_used_blocks: KV blocks in use.
        kv_total_blocks: KV blocks of the engine.
        totals: Lifetime totals, the unavailable time so far included.
    """

    at: float
    phase: Phase
    settings: EngineSettings
    num_running: int
    num_waiting: int
    num_preempted_waiting: int
    kv_used_blocks: int
    kv_total_blocks: int
    totals: LifetimeTotals

    @property
    def kv_usage(self) -> float:
        """Share of KV blocks in use, 0-1."""
        return self.kv_used_blocks / self.kv_total_blocks if self.kv_total_blocks else 0.0


class Engine:
    """One simulated vLLM server, restartable.

    Args:
        profile: The model and GPU.
        settings: The settings of the first incarnation.
        now: The driver's time at creation.
        loading: Start down, ready only after the restart time (as a fresh ``vllm serve``);
            by default the engine serves at once.
    """

    def __init__(
        self,
        profile: EngineProfile,
        settings: EngineSettings,
        *,
        now: float = 0.0,
        loading: bool = False,
    ) -> None:
        self.profile = profile
        self.settings = settings
        self._scheduler: Scheduler | None = None
        self._finished: list[FinishedRequest] = []
        self._retired = LifetimeTotals()
        self._drain_deadline: float | None = None
        self._ready_at: float | None = None
        self._unavailable_since: float | None = None
        self._restart_to: EngineSettings | None = None
        self._next_id = 0
        self._front_end = FrontEnd(
            profile.frontend_us_per_request * 1e-6, profile.frontend_latency_us * 1e-6
        )
        self.phase = Phase.SERVING
        if loading:
            # A first start is not a restart: it counts neither as one nor as downtime.
            self.phase = Phase.DOWN
            self._restart_to = settings
            self._ready_at = now + profile.restart_downtime_s(
                settings.max_num_seqs, settings.max_num_batched_tokens
            )
        else:
            self._scheduler = Scheduler(profile, settings)

    # -- observation -------------------------------------------------------------------

    @property
    def scheduler(self) -> Scheduler | None:
        """The incarnation in force, or None while down."""
        return self._scheduler

    @property
    def counters(self) -> EngineCounters | None:
        """Counters of the incarnation in force (what ``/metrics`` shows), None while down."""
        return self._scheduler.counters if self._scheduler else None

    @property
    def accepting(self) -> bool:
        """Whether a new request would be taken (not draining, down or stopped)."""
        return self.phase is Phase.SERVING

    @property
    def has_work(self) -> bool:
        """Whether a step could compute something now."""
        return self._scheduler is not None and self._scheduler.has_work

    @property
    def has_requests(self) -> bool:
        """Whether a request is in the scheduler or still on its way there (front end)."""
        return self.has_work or self._front_end.pending > 0

    @property
    def next_transition_at(self) -> float | None:
        """When :meth:`advance` next has something to do.

        That is a request reaching the scheduler through the front end, a drain deadline, or
        the end of a restart.
        """
        transition = None
        if self.phase is Phase.DRAINING:
            transition = self._drain_deadline
        elif self.phase is Phase.DOWN:
            transition = self._ready_at
        ready = self._front_end.next_ready_at
        if ready is None or (transition is not None and transition < ready):
            return transition
        return ready

    def snapshot(self, now: float) -> EngineSnapshot:
        """The state at ``now``; lifetime totals include downtime up to ``now``."""
        scheduler = self._scheduler
        return EngineSnapshot(
            at=now,
            phase=self.phase,
            settings=self._restart_to or self.settings,
            num_running=scheduler.num_running if scheduler else 0,
            num_waiting=scheduler.num_waiting if scheduler else 0,
            num_preempted_waiting=scheduler.num_preempted_waiting if scheduler else 0,
            kv_used_blocks=scheduler.kv.used if scheduler else 0,
            kv_total_blocks=scheduler.kv.num_blocks if scheduler else 0,
            totals=self.lifetime_totals(now),
        )

    def lifetime_totals(self, now: float) -> LifetimeTotals:
        """Totals over every incarnation so far, downtime counted up to ``now``."""
        counters = self.counters
        retired = self._retired
        downtime = retired.downtime_s
        if self._unavailable_since is not None:
            downtime += now - self._unavailable_since
        return LifetimeTotals(
            preemptions=retired.preemptions + (counters.preemptions if counters else 0),
            prompt_tokens=retired.prompt_tokens + (counters.prompt_tokens if counters else 0),
            generation_tokens=retired.generation_tokens
            + (counters.generation_tokens if counters else 0),
            prefix_cache_hits=retired.prefix_cache_hits
            + (counters.prefix_cache_hits if counters else 0),
            restarts=retired.restarts,
            downtime_s=downtime,
            busy_s=retired.busy_s + (counters.busy_s if counters else 0.0),
            outcomes=dict(retired.outcomes),
        )

    def take_finished(self) -> list[FinishedRequest]:
        """Records of the requests that ended since the last call."""
        finished, self._finished = self._finished, []
        return finished

    def generated_tokens(self, request: Request) -> int:
        """Output tokens ``request`` has received so far (0 once its incarnation is gone)."""
        return self._scheduler.generated_tokens(request) if self._scheduler else request.generated

    # -- driving -----------------------------------------------------------------------

    def submit(
        self,
        prompt_tokens: int,
        max_tokens: int,
        now: float,
        request_id: str | None = None,
        *,
        priority: int = 0,
        token_ids: Sequence[int] = (),
    ) -> Request | None:
        """A request arrives at ``now``; return it, or None when it is rejected at once.

        ``priority`` is the request's field of vLLM's API; only a scheduler running
        ``--scheduling-policy priority`` looks at it (vLLM 0.33 takes it under FCFS too).
        ``token_ids``, when the client's prompt had them, name its blocks for the prefix
        cache; without them the prompt is taken as unique.
        """
        if request_id is None:
            request_id = f"cmpl-{self._next_id}"
        self._next_id += 1
        names = block_names(token_ids, self.settings.block_size) if token_ids else ()
        request = Request(
            request_id, now, prompt_tokens, max_tokens, priority=priority, block_names=names
        )
        if self._scheduler is None or self.phase is not Phase.SERVING:
            self._record(finished_record(request, now, Outcome.REJECTED, RejectReason.UNAVAILABLE))
            return None
        if self._front_end.active:
            self._front_end.enter(request, now)
            return request
        rejected = self._scheduler.submit(request, now)
        if rejected is not None:
            self._record(rejected)
            return None
        return request

    def begin_step(self, now: float) -> StepPlan | None:
        """Start the next engine step at ``now``; None when there is nothing to compute."""
        if self._scheduler is None or self.phase not in (Phase.SERVING, Phase.DRAINING):
            return None
        return self._scheduler.begin_step(now)

    def end_step(self) -> StepResult:
        """End the step in progress; its tokens come out at ``plan.ends_at``."""
        if self._scheduler is None:
            msg = "end_step called while the engine is down"
            raise RuntimeError(msg)
        result = self._scheduler.end_step()
        for record in result.finished:
            self._record(record)
        if self.phase is Phase.DRAINING and not self.has_requests:
            self._go_down(result.plan.ends_at, self._restart_to)
        return result

    def advance(self, now: float) -> None:
        """Apply what is due by ``now``.

        That is requests reaching the scheduler through the front end, a drain deadline
        passing, a restart completing.
        """
        if self._scheduler is not None:
            for ready_at, request in self._front_end.due(now):
                rejected = self._scheduler.submit(request, ready_at)
                if rejected is not None:
                    self._record(rejected)
        if self.phase is Phase.DRAINING and self._drain_deadline is not None:
            scheduler = self._scheduler
            if now >= self._drain_deadline and scheduler is not None and not scheduler.in_step:
                self._go_down(now, self._restart_to)
        if self.phase is Phase.DOWN and self._ready_at is not None and now >= self._ready_at:
            self._come_up(self._ready_at)

    def abort(self, request: Request, now: float) -> None:
        """Abort one request between steps, as vLLM does when its client disconnects."""
        if self._front_end.remove(request):
            self._record(finished_record(request, now, Outcome.ABORTED))
        elif self._scheduler is not None:
            record = self._scheduler.abort(request, now)
            if record is not None:
                self._record(record)

    def shutdown(self, now: float) -> None:
        """SIGTERM: drain for up to ``shutdown_timeout`` s, then stop for good."""
        self._begin_shutdown(now, None)

    def restart(self, now: float, settings: EngineSettings | None = None) -> None:
        """Shut down as on SIGTERM, then come back after the restart time with ``settings``."""
        self._begin_shutdown(now, settings or self.settings)
        self._retired.restarts += 1

    # -- lifecycle ---------------------------------------------------------------------

    def _begin_shutdown(self, now: float, restart_to: EngineSettings | None) -> None:
        if self.phase is not Phase.SERVING:
            msg = f"cannot shut down an engine that is {self.phase.value}"
            raise RuntimeError(msg)
        self._restart_to = restart_to
        self._unavailable_since = now
        timeout = self.settings.shutdown_timeout
        scheduler = self._scheduler
        if timeout > 0 and scheduler is not None and self.has_requests:
            self.phase = Phase.DRAINING
            self._drain_deadline = now + timeout
        elif scheduler is None or not scheduler.in_step:
            self._go_down(now, restart_to)
        else:
            # A step is in flight: abort once it ends, as the deadline has already passed.
            self.phase = Phase.DRAINING
            self._drain_deadline = now

    def _go_down(self, now: float, restart_to: EngineSettings | None) -> None:
        for request in self._front_end.take_all():
            self._record(finished_record(request, now, Outcome.ABORTED))
        scheduler = self._scheduler
        if scheduler is not None:
            for record in scheduler.abort_all(now):
                self._record(record)
            self._retire(scheduler.counters)
        self._scheduler = None
        self._drain_deadline = None
        if self._unavailable_since is None:
            self._unavailable_since = now
        if restart_to is None:
            self.phase = Phase.STOPPED
            self._ready_at = None
            return
        self.phase = Phase.DOWN
        self._restart_to = restart_to
        self._ready_at = now + self.profile.restart_downtime_s(
            restart_to.max_num_seqs, restart_to.max_num_batched_tokens
        )

    def _come_up(self, now: float) -> None:
        settings = self._restart_to or self.settings
        self.settings = settings
        self._scheduler = Scheduler(self.profile, settings)
        self._restart_to = None
        self._ready_at = None
        self.phase = Phase.SERVING
        if self._unavailable_since is not None:
            self._retired.downtime_s += now - self._unavailable_since
            self._unavailable_since = None

    def _retire(self, counters: EngineCounters) -> None:
        self._retired.preemptions += counters.preemptions
        self._retired.prompt_tokens += counters.prompt_tokens
        self._retired.generation_tokens += counters.generation_tokens
        self._retired.prefix_cache_hits += counters.prefix_cache_hits
        self._retired.busy_s += counters.busy_s

    def _record(self, record: FinishedRequest) -> None:
        self._retired.outcomes[record.outcome.value] += 1
        self._finished.append(record)
