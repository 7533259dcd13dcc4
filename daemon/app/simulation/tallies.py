"""What one finished run leaves for the metrics: per-phase counts, latencies and events.

Small and picklable, so that runs can go to worker processes and grid points can be combined
phase by phase (the per-phase oracle). Requests belong to the phase they arrived in; latencies
are as the client saw them (the wait at the gate included); rejected (the gate's 503s
included) and aborted requests are misses (:func:`simulator.report.meets_slo`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from daemon.app.simulation.events import Event
from daemon.app.simulation.workloads import Stretch, Workload
from simulator.report import meets_slo
from simulator.requests import Outcome
from simulator.virtual_time import VirtualRun

BUCKET_S = 5.0  # resolution of the attainment series (arrival time)


@dataclass(slots=True)
class PhaseTally:
    """One phase of one run."""

    name: str
    start_s: float
    end_s: float
    total: int = 0
    good: int = 0
    good_tokens: int = 0
    rejected: int = 0
    aborted: int = 0
    generated_tokens: float = 0.0
    preemptions: int = 0
    ttfts: list[float] = field(default_factory=list)
    tpots: list[float] = field(default_factory=list)


@dataclass(slots=True)
class RunTally:
    """One run of one controller on one seed.

    Attributes:
        controller: The controller's name.
        seed: The workload's seed.
        duration_s: The workload's duration (rates are over it).
        phases: Per phase, in time order.
        restarts: Engine restarts.
        downtime_s: Seconds the engine was down or draining for restarts.
        preemptions: Preemptions over the run.
        events: What the controller did.
        buckets: Per ``BUCKET_S`` of arrival time: (requests, met the SLO).
        series: Every 5 s: (t, max_num_seqs, gate cap or None, kv_usage, running, queued).
        settings: The settings it started with.
    """

    controller: str
    seed: int
    duration_s: float
    phases: list[PhaseTally]
    restarts: int
    downtime_s: float
    preemptions: int
    events: list[Event]
    buckets: list[tuple[int, int]]
    series: list[tuple[float, int, int | None, float, int, int]]
    settings: dict[str, float] = field(default_factory=dict)


def tally(
    controller: str, seed: int, run: VirtualRun, workload: Workload, events: list[Event]
) -> RunTally:
    """Count a finished run."""
    phases = [PhaseTally(p.name, p.start_s, p.end_s) for p in workload.phases]
    count = int(workload.duration_s // BUCKET_S) + 1
    buckets = [[0, 0] for _ in range(count)]
    for record in run.finished:
        good = meets_slo(record)
        index = min(int(record.arrived_at // BUCKET_S), count - 1)
        buckets[index][0] += 1
        buckets[index][1] += int(good)
        phase = _phase_of(phases, record.arrived_at)
        if phase is None:
            continue
        phase.total += 1
        phase.good += int(good)
        phase.good_tokens += record.output_tokens if good else 0
        phase.rejected += int(record.outcome is Outcome.REJECTED)
        phase.aborted += int(record.outcome is Outcome.ABORTED)
        if record.outcome is Outcome.COMPLETED and record.ttft_s is not None:
            phase.ttfts.append(record.ttft_s)
            if record.tpot_s is not None:
                phase.tpots.append(record.tpot_s)
    for sample in run.samples:
        phase = _phase_of(phases, sample.t - 1e-9)
        if phase is not None:
            phase.generated_tokens += sample.throughput_tok_s * 1.0
            phase.preemptions += sample.preemptions
    totals = run.engine.lifetime_totals(run.now)
    series = [
        (s.t, s.max_num_seqs, s.gate_cap, s.kv_usage, s.running, s.gate_queued + s.waiting)
        for s in run.samples
        if round(s.t) % 5 == 0
    ]
    return RunTally(
        controller=controller,
        seed=seed,
        duration_s=workload.duration_s,
        phases=phases,
        restarts=totals.restarts,
        downtime_s=totals.downtime_s,
        preemptions=totals.preemptions,
        events=events,
        buckets=[(n, g) for n, g in buckets],
        series=series,
    )


def _phase_of(phases: list[PhaseTally], at: float) -> PhaseTally | None:
    for phase in phases:
        if Stretch(phase.name, phase.start_s, phase.end_s).contains(at):
            return phase
    return None
