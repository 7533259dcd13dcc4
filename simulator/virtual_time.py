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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from simulator.arrivals import Arrival
from simulator.engine import Engine, EngineSnapshot, Phase
from simulator.requests import FinishedRequest, Outcome
from simulator.settings import EngineSettings


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
        rejected: Requests rejected over the interval.
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


class VirtualRun:
    """A workload driven through an engine in virtual time.

    Args:
        engine: The engine; its clock is this run's ``now``, which starts at 0.
        arrivals: The workload, sorted by arrival time.
        sample_interval_s: Spacing of the sampling grid.
    """

    def __init__(
        self, engine: Engine, arrivals: Sequence[Arrival], *, sample_interval_s: float = 1.0
    ) -> None:
        self.engine = engine
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
        return self._next_arrival >= len(self._arrivals) and not self.engine.has_work

    def snapshot(self) -> EngineSnapshot:
        """The engine's state now."""
        return self.engine.snapshot(self.now)

    def restart(self, settings: EngineSettings | None = None) -> None:
        """Restart the engine now, with ``settings`` (default: those in force)."""
        self.engine.restart(self.now, settings)

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
                engine.submit(arrival.prompt_tokens, arrival.output_tokens, arrival.arrived_at)
            plan = engine.begin_step(self.now) if engine.has_work else None
            if plan is not None:
                self._sample_before(plan.ends_at)
                engine.end_step()
                self.now = plan.ends_at
                continue
            if engine.has_work and engine.phase in (Phase.SERVING, Phase.DRAINING):
                msg = f"the engine has work but scheduled nothing at t={self.now}"
                raise RuntimeError(msg)
            if self.done:
                break  # the clock stays at the last completion: that is the run's end
            following = arrivals[self._next_arrival].arrived_at if not self._exhausted else until
            transition = engine.next_transition_at
            jump = min(until, following, transition if transition is not None else math.inf)
            self._sample_before(jump)
            self.now = max(jump, self.now)
        engine.advance(self.now)
        self._collect()

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
                rejected=_delta(before.outcomes, after.outcomes, Outcome.REJECTED),
            )
        )
        self._previous = current

    def _collect(self) -> None:
        self.finished.extend(self.engine.take_finished())


def _delta(before: dict[str, int], after: dict[str, int], outcome: Outcome) -> int:
    return after[outcome.value] - before[outcome.value]
