"""A closed-loop load in virtual time, as ``vllm bench serve --max-concurrency`` makes one.

A fixed number of clients each send their next request when the last one ends.

This is how the published concurrency sweeps (docs/sources.md#concurrency-and-latency) were
measured, so it is how the simulator is calibrated against them.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.engine import Engine
from simulator.requests import FinishedRequest, Outcome


@dataclass(frozen=True, slots=True)
class ClosedLoopResult:
    """What a closed-loop run measured.

    Attributes:
        records: Every request's record, in the order they ended.
        duration_s: From the first request to the last completion.
        preemptions: Preemptions over the run.
    """

    records: tuple[FinishedRequest, ...]
    duration_s: float
    preemptions: int

    @property
    def output_tok_s(self) -> float:
        """Output tokens per second over the run."""
        tokens = sum(r.output_tokens for r in self.records if r.outcome is Outcome.COMPLETED)
        return tokens / self.duration_s if self.duration_s else 0.0


def run_closed_loop(
    engine: Engine,
    *,
    concurrency: int,
    prompt_tokens: int,
    output_tokens: int,
    num_requests: int,
) -> ClosedLoopResult:
    """Keep ``concurrency`` requests in flight until ``num_requests`` have been sent."""
    now = 0.0
    sent = 0
    records: list[FinishedRequest] = []
    for _ in range(min(concurrency, num_requests)):
        engine.submit(prompt_tokens, output_tokens, now)
        sent += 1
    while engine.has_work:
        plan = engine.begin_step(now)
        if plan is None:
            msg = f"the engine has work but scheduled nothing at t={now}"
            raise RuntimeError(msg)
        result = engine.end_step()
        now = plan.ends_at
        for _ in result.finished:
            if sent < num_requests:
                engine.submit(prompt_tokens, output_tokens, now)
                sent += 1
        records.extend(engine.take_finished())
    records.extend(engine.take_finished())
    totals = engine.lifetime_totals(now)
    return ClosedLoopResult(tuple(records), now, totals.preemptions)
