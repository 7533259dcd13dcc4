"""A :class:`~daemon.whatif.summary.WorkloadSummary` back into arrivals the simulator replays.

The simulator's own synthetic workload does the drawing (:mod:`simulator.synthetic_workloads`:
a gamma renewal process of the given rate and CV, log-normal lengths from a median and a p90
clamped to [1, max]), so a what-if replays traffic of the same kind as the shipped workloads,
from one seed, the same arrivals for every candidate.
"""

from __future__ import annotations

from daemon.whatif.summary import LengthSummary, WorkloadSummary
from simulator.arrivals import Arrival
from simulator.synthetic_workloads import (
    GammaArrivals,
    LogNormalLengths,
    WorkloadSpec,
    generate,
)

# The generator needs p90 strictly above the median; a fit of one narrow bucket comes close.
_MIN_SPREAD = 1.01


def workload_spec(summary: WorkloadSummary, duration_s: float, seed: int = 0) -> WorkloadSpec:
    """The synthetic workload of ``summary``, ``duration_s`` long."""
    return WorkloadSpec(
        name=f"whatif-{summary.instance}",
        description=f"{summary.instance}'s last {summary.window_s:.0f} s, from its metrics",
        duration_s=duration_s,
        seed=seed,
        arrivals=GammaArrivals(rate_rps=summary.rate_rps, cv=summary.arrival_cv),
        prompt_tokens=_lengths(summary.prompt),
        output_tokens=_lengths(summary.output),
    )


def synthesise(summary: WorkloadSummary, duration_s: float, seed: int = 0) -> list[Arrival]:
    """The arrivals of :func:`workload_spec`."""
    return generate(workload_spec(summary, duration_s, seed))


def _lengths(lengths: LengthSummary) -> LogNormalLengths:
    median = max(lengths.fit.median, 1.0)
    return LogNormalLengths(
        median=median,
        p90=max(lengths.fit.p90, median * _MIN_SPREAD),
        min=1,
        max=max(lengths.max_tokens, 1),
    )
