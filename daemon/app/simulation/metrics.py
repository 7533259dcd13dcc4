"""The metrics of a controller, from its runs' tallies: per seed, per phase, and their mean.

Definitions (docs/simulate.md says the same):

- ``slo_attainment``: requests that met the SLO (completed, TTFT <= 2 s, TPOT <= 100 ms, as
  the client saw them: the wait at the gate counts) over every request that arrived; refused
  (the gate's 503s), rejected and aborted requests are misses.
- ``goodput_rps`` / ``goodput_tok_s``: requests / output tokens that met the SLO, per second
  of the workload's duration (the same denominator for every controller). ``throughput_tok_s``:
  every generated token, per second of the duration.
- ``ttft_p95_s`` / ``tpot_p95_s``: nearest-rank p95 over completed requests (client side).
- ``preemptions``, ``restarts``, ``downtime_s``: the engine's, downtime counted from the
  moment a restart stops serving to the moment the engine serves again.
- ``actions``: changes made to the server or its gate (restarts into new settings, reverts,
  admission cap moves).
- ``time_to_react_s``: from the start of the strongest burst (the highest multiplier) to the
  controller's first action at or after it, within the burst and the 5 minutes after; None
  when it did nothing then.
- ``time_to_recover_s``: from the start of that burst until the SLO attainment over 60 s is
  back at >= 95% for good: the end of the last 60 s window (on a 5 s grid, by arrival time,
  within the burst and the 10 minutes after) whose attainment was below 95%, minus the burst's
  start; 0 when no window fell below; None when the last window of that stretch is still
  below.
- ``reversals``: two changes of the same restart knob (max_num_seqs, max_num_batched_tokens...)
  in opposite directions less than 5 minutes apart (a revert included). Cap moves of the fast
  loop are its job and do not count.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from daemon.app.simulation.events import CAP, RESTART, REVERT, SERVER_CHANGES, Event
from daemon.app.simulation.tallies import BUCKET_S, PhaseTally, RunTally
from daemon.app.simulation.workloads import Stretch
from simulator.report import percentile

REACT_AFTER_S = 300.0
RECOVER_AFTER_S = 600.0
RECOVERY_WINDOW_S = 60.0
RECOVERED = 0.95
REVERSAL_S = 300.0
METRICS = (
    "slo_attainment",
    "goodput_rps",
    "goodput_tok_s",
    "throughput_tok_s",
    "ttft_p95_s",
    "tpot_p95_s",
    "preemptions",
    "restarts",
    "actions",
    "downtime_s",
    "time_to_react_s",
    "time_to_recover_s",
    "reversals",
)


def phase_metrics(phases: Sequence[PhaseTally], events: Sequence[Event]) -> dict[str, Any]:
    """The request metrics of one or more phases taken together."""
    total = sum(p.total for p in phases)
    good = sum(p.good for p in phases)
    span = sum(p.end_s - p.start_s for p in phases) or 1.0
    ttfts = [x for p in phases for x in p.ttfts]
    tpots = [x for p in phases for x in p.tpots]
    inside = [e for e in events if any(p.start_s <= e.at < p.end_s for p in phases)]
    return {
        "slo_attainment": good / total if total else None,
        "goodput_rps": good / span,
        "goodput_tok_s": sum(p.good_tokens for p in phases) / span,
        "throughput_tok_s": sum(p.generated_tokens for p in phases) / span,
        "ttft_p95_s": percentile(ttfts, 0.95),
        "tpot_p95_s": percentile(tpots, 0.95),
        "preemptions": sum(p.preemptions for p in phases),
        "requests": total,
        "refused_or_aborted": sum(p.rejected + p.aborted for p in phases),
        "restarts": sum(1 for e in inside if e.kind in (RESTART, REVERT)),
        "actions": sum(1 for e in inside if e.kind in SERVER_CHANGES),
    }


def run_metrics(result: RunTally, bursts: Sequence[Stretch]) -> dict[str, Any]:
    """Every metric of one run (see the module docstring)."""
    metrics = phase_metrics(result.phases, result.events)
    burst = max(bursts, key=lambda b: b.multiplier, default=None)
    metrics |= {
        "preemptions": result.preemptions,
        "restarts": result.restarts,
        "actions": sum(1 for e in result.events if e.kind in SERVER_CHANGES),
        "downtime_s": result.downtime_s,
        "time_to_react_s": None if burst is None else react_s(result.events, burst),
        "time_to_recover_s": None if burst is None else recover_s(result.buckets, burst),
        "reversals": reversals(result.events),
    }
    return metrics


def react_s(events: Sequence[Event], burst: Stretch) -> float | None:
    """Seconds from the burst's start to the first action (see the module docstring)."""
    horizon = burst.end_s + REACT_AFTER_S
    for event in events:
        if event.kind in SERVER_CHANGES and burst.start_s <= event.at <= horizon:
            return event.at - burst.start_s
    return None


def recover_s(buckets: Sequence[tuple[int, int]], burst: Stretch) -> float | None:
    """Seconds from the burst's start until the 60 s attainment is back for good."""
    per_window = int(RECOVERY_WINDOW_S // BUCKET_S)
    first = int(burst.start_s // BUCKET_S)
    last = min(int((burst.end_s + RECOVER_AFTER_S) // BUCKET_S), len(buckets))
    breached_until: float | None = None
    for end in range(first + 1, last + 1):
        window = buckets[max(0, end - per_window) : end]
        total = sum(n for n, _ in window)
        if total and sum(g for _, g in window) / total < RECOVERED:
            breached_until = end * BUCKET_S
    if breached_until is None:
        return 0.0
    if breached_until >= last * BUCKET_S:
        return None
    return breached_until - burst.start_s


def reversals(events: Sequence[Event]) -> int:
    """Direction changes of one restart knob within 5 minutes (see the module docstring)."""
    last: dict[str, tuple[float, float]] = {}  # knob -> (time, signed direction)
    count = 0
    for event in events:
        if event.kind == CAP or event.kind not in SERVER_CHANGES:
            continue
        for knob, (old, new) in event.changes.items():
            if new == old:
                continue
            direction = 1.0 if new > old else -1.0
            previous = last.get(knob)
            if previous and previous[1] != direction and event.at - previous[0] < REVERSAL_S:
                count += 1
            last[knob] = (event.at, direction)
    return count


def mean_of(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The mean of each metric over seeds (None where any seed had none)."""
    merged: dict[str, Any] = {}
    for key in rows[0]:
        values = [row[key] for row in rows]
        if any(v is None for v in values):
            known = [v for v in values if v is not None]
            merged[key] = statistics.fmean(known) if len(known) == len(values) else None
        else:
            merged[key] = statistics.fmean(values)
    return merged
