"""Run the engine in virtual time: a workload as fast as the CPU allows, observable on the way.

:class:`VirtualRun` feeds a list of arrivals to an :class:`~simulator.engine.Engine`, runs its
steps back to back (each takes the profile's step time, in virtual seconds), jumps over idle
time, and samples the engine's state on a fixed grid (1 s by default) for reports. A
controller in the loop advances it piecewise and acts between pieces::

    run = VirtualRun(engine, arrivals)
    while not run.done:
        run.run_until(run.now + 5.0)
        state = run.snapshot()
        if too_many_preemptions(state):
            run.restart(dataclasses.replace(state.settings, max_num_seqs=256))

With a :class:`~simulator.gate.Gate` (``VirtualRun(engine, arrivals, gate=Gate(64, 1.5))``)
arrivals pass an admission cap and a FIFO queue with a timeout before the engine, as behind
HAProxy: the wait counts in each request's queue time, TTFT and end-to-end latency, a request
whose wait runs out is rejected (``queue_timeout``, an SLO miss), and a controller moves the
cap live with :meth:`VirtualRun.set_gate_cap`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from simulator.arrivals import Arrival
from simulator.engine import Engine, EngineSnapshot, Phase
from simulator.gate import Gate, timeout_record, waited_record
from simulator.requests import FinishedRequest, Outcome
from simulator.settings import EngineSettings
from simulator.steps import StepResult


class RunObserver(Protocol):
    """Sees what the engine itself sees, as vLLM's own metrics do (the gate's wait left out)."""

    def step(self, result: StepResult) -> None:
        """One engine step ended."""
        ...

    def finished(self, record: FinishedRequest) -> None:
        """A request left the engine (completed, aborted or refused by it)."""
        ...


@dataclass(frozen=True, slots=True)
class Sample:
    """The engine at one point of the sampling grid, with what happened since the last one.

    Attributes:
        t: Time of the sample (s).
        phase: Lifecycle phase.
        max_num_seqs: ``max_num_seqs`` in force (or coming, while down).
        running: Requests running.
        waiting: Requests waiting.
        kv_usage: Share of KV blocks in use, 0-1.
        throughput_tok_s: Output tokens per second over the interval.
        preemptions: Preemptions over the interval.
        completed: Requests completed over the interval.
        aborted: Requests aborted over the interval.
        rejected: Requests rejected over the interval (by the gate's timeout too).
        gate_cap: The gate's cap, or None without a gate.
        gate_queued: Requests waiting at the gate.
        busy_share: Share of the interval the engine spent in steps, 0-1 (GPU busy share).
            A step counts when it ends, so one sample may hold a little of its neighbour's;
            sums over many samples are exact.
    """

    t: float
    phase: str
    max_num_seqs: int
    running: int
    waiting: int
    kv_usage: float
    throughput_tok_s: float
    preemptions: int
    completed: int
    aborted: int
    rejected: int
    gate_cap: int | None = None
    gate_queued: int = 0
    busy_share: float = 0.0


class VirtualRun:
    """A workload driven through an engine in virtual time.

    Args:
        engine: The engine; its clock is this run's ``now``, which starts at 0.
        arrivals: The workload, sorted by arrival time.
        sample_interval_s: Spacing of the sampling grid.
        gate: An admission gate in front of the engine, or None (arrivals go straight in).
        observer: Told of every step and every record the engine produces, or None.
    """

    def __init__(
        self,
        engine: Engine,
        arrivals: Sequence[Arrival],
        *,
        sample_interval_s: float = 1.0,
        gate: Gate[Arrival] | None = None,
        observer: RunObserver | None = None,
    ) -> None:
        self.engine = engine
        self.gate = gate
        self.observer = observer
        # Request id -> seconds it waited at the gate, until its record comes out.
        self._waited: dict[str, float] = {}
        # Request id -> seconds it waited at the gate, for the records that came out: what
        # vLLM itself measured is the record's latency minus this (a governor in the loop
        # reads vLLM's histograms, which never see the gate).
        self.gate_waits: dict[str, float] = {}
        # The waits of the last 1024 requests let in, as HAProxy averages its ``qtime``.
        self.recent_gate_waits: deque[float] = deque(maxlen=1024)
        self._gate_ids = 0
        self._previous_timeouts = 0
        self.now = 0.0
        self.samples: list[Sample] = []
        self.finished: list[FinishedRequest] = []
        self._arrivals = arrivals
        self._next_arrival = 0
        self._interval = sample_interval_s
        self._next_sample_at = sample_interval_s
        self._previous = engine.snapshot(0.0)

    @property
    def done(self) -> bool:
        """Every arrival was handed over and nothing is left to compute."""
        waiting = self.gate is not None and self.gate.queued > 0
        return (
            self._next_arrival >= len(self._arrivals)
            and not self.engine.has_requests
            and not waiting
        )

    def snapshot(self) -> EngineSnapshot:
        """The engine's state now."""
        return self.engine.snapshot(self.now)

    def restart(self, settings: EngineSettings | None = None) -> None:
        """Restart the engine now, with ``settings`` (default: those in force)."""
        self.engine.restart(self.now, settings)

    def set_gate_cap(self, cap: int) -> None:
        """Change the gate's cap now, live: a raise lets waiting requests in at once."""
        if self.gate is None:
            message = "this run has no gate"
            raise RuntimeError(message)
        self.gate.set_cap(cap)
        self._settle_gate(self.gate)

    def set_gate_draining(self, draining: bool) -> None:
        """Drain the gate (admit nothing new; those inside finish) or lift the drain."""
        if self.gate is None:
            message = "this run has no gate"
            raise RuntimeError(message)
        self.gate.draining = draining
        self._settle_gate(self.gate)

    def run(self, horizon: float = math.inf) -> None:
        """Run until the workload is done, or until ``horizon``."""
        self.run_until(horizon)

    def run_until(self, until: float) -> None:
        """Advance to ``until``; a step in progress then may end a little after it."""
        engine = self.engine
        arrivals = self._arrivals
        while self.now < until:
            engine.advance(self.now)
            while self._next_arrival < len(arrivals):
                arrival = arrivals[self._next_arrival]
                if arrival.arrived_at > self.now:
                    break
                self._next_arrival += 1
                if self.gate is None:
                    engine.submit(
                        arrival.prompt_tokens,
                        arrival.output_tokens,
                        arrival.arrived_at,
                        priority=arrival.priority,
                    )
                else:
                    self._through_gate(self.gate, arrival)
            if self.gate is not None:
                self._settle_gate(self.gate)
            plan = engine.begin_step(self.now) if engine.has_work else None
            if plan is not None:
                self._sample_before(plan.ends_at)
                self._step_ended(engine.end_step())
                self.now = plan.ends_at
                if self.gate is not None:
                    self._settle_gate(self.gate)
                continue
            if engine.has_work and engine.phase in (Phase.SERVING, Phase.DRAINING):
                msg = f"the engine has work but scheduled nothing at t={self.now}"
                raise RuntimeError(msg)
            if self.done:
                break  # the clock stays at the last completion: that is the run's end
            following = arrivals[self._next_arrival].arrived_at if not self._exhausted else until
            transition = engine.next_transition_at
            jump = min(until, following, transition if transition is not None else math.inf)
            if self.gate is not None:
                jump = min(jump, self.gate.next_deadline)
            self._sample_before(jump)
            self.now = max(jump, self.now)
        engine.advance(self.now)
        if self.gate is not None:
            self._settle_gate(self.gate)
        self._collect()

    def _step_ended(self, result: StepResult) -> None:
        if self.observer is not None:
            self.observer.step(result)

    @property
    def _exhausted(self) -> bool:
        return self._next_arrival >= len(self._arrivals)

    def _sample_before(self, until: float) -> None:
        """Record every grid point before ``until`` with the state as it is now."""
        while self._next_sample_at < until:
            self._record_sample(self._next_sample_at)
            self._next_sample_at += self._interval

    def _record_sample(self, at: float) -> None:
        current = self.engine.snapshot(at)
        before, after = self._previous.totals, current.totals
        tokens = after.generation_tokens - before.generation_tokens
        gate = self.gate
        timeouts = gate.timed_out if gate is not None else 0
        self.samples.append(
            Sample(
                t=round(at, 6),
                phase=current.phase.value,
                max_num_seqs=current.settings.max_num_seqs,
                running=current.num_running,
                waiting=current.num_waiting,
                kv_usage=round(current.kv_usage, 4),
                throughput_tok_s=tokens / self._interval,
                preemptions=after.preemptions - before.preemptions,
                completed=_delta(before.outcomes, after.outcomes, Outcome.COMPLETED),
                aborted=_delta(before.outcomes, after.outcomes, Outcome.ABORTED),
                rejected=_delta(before.outcomes, after.outcomes, Outcome.REJECTED)
                + timeouts
                - self._previous_timeouts,
                gate_cap=gate.cap if gate is not None else None,
                gate_queued=gate.queued if gate is not None else 0,
                busy_share=round((after.busy_s - before.busy_s) / self._interval, 6),
            )
        )
        self._previous = current
        self._previous_timeouts = timeouts

    def _collect(self) -> None:
        records = self.engine.take_finished()
        if self.observer is not None:
            for record in records:
                self.observer.finished(record)
        if self.gate is None:
            self.finished.extend(records)
            return
        for record in records:
            self.gate.release()
            waited = self._waited.pop(record.request_id)
            self.gate_waits[record.request_id] = waited
            self.recent_gate_waits.append(waited)
            self.finished.append(waited_record(record, waited))

    # -- the gate ----------------------------------------------------------------------

    def _through_gate(self, gate: Gate[Arrival], arrival: Arrival) -> None:
        """An arrival reaches the gate at its own time: in at once, or into the queue."""
        self._expire(gate, arrival.arrived_at)
        if gate.arrive(arrival, arrival.arrived_at):
            self._forward(arrival, arrival.arrived_at, waited_s=0.0)

    def _settle_gate(self, gate: Gate[Arrival]) -> None:
        """Free the slots of ended requests, refuse the expired, let the next ones in."""
        while True:
            self._collect()
            self._expire(gate, self.now)
            admitted = gate.admit(self.now)
            if not admitted:
                return
            for waiting in admitted:
                self._forward(waiting.item, self.now, waited_s=self.now - waiting.arrived_at)

    def _expire(self, gate: Gate[Arrival], now: float) -> None:
        for waiting in gate.expire(now):
            self.finished.append(timeout_record(self._next_gate_id(), waiting))

    def _forward(self, arrival: Arrival, now: float, *, waited_s: float) -> None:
        request_id = self._next_gate_id()
        self._waited[request_id] = waited_s
        self.engine.submit(
            arrival.prompt_tokens, arrival.output_tokens, now, request_id, priority=arrival.priority
        )

    def _next_gate_id(self) -> str:
        self._gate_ids += 1
        return f"gate-{self._gate_ids}"


def _delta(before: dict[str, int], after: dict[str, int], outcome: Outcome) -> int:
    return after[outcome.value] - before[outcome.value]
