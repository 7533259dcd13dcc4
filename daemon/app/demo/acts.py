"""Each act of the demo with the governor, as the server counted it, and without it.

*With* is the run itself: each server process writes, per second of its own clock (which
starts when it becomes ready), how many requests arrived and how many met the SLO
(``by_arrival_second`` in ``sim serve --summary``'s line), so a request falls into the act of
its second of arrival, in both counts; the arrivals that fell while no process served are in
the act of their due time and count as missed, the requests the end cut off are not judged
(as in the run's totals).
*Without* is the same workload, the same seed, on the same engine profile with the starting
settings and nobody changing them, simulated in virtual time after the run
(:func:`daemon.app.simulation.runs.execute`, the machinery of ``vllm-governor simulate``):
what would have happened had the governor not been there. An act is one of the workload's
named phases.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from daemon.app.simulation.runs import Job, execute, static_name
from simulator.synthetic_workloads import NamedPhase


def without_governor(
    workload: Path, profile: str, seed: int, max_num_seqs: int, max_num_batched_tokens: int
) -> list[dict[str, Any]]:
    """Per phase of ``workload``: arrived, met the SLO, on the starting settings throughout."""
    job = Job(
        controller=static_name(max_num_seqs, max_num_batched_tokens),
        profile=profile,
        trace=None,
        spec=workload,
        seed=seed,
    )
    return [{"arrived": p.total, "met_slo": p.good} for p in execute(job).phases]


def with_governor(
    lines: Sequence[dict[str, Any]],
    *,
    origin: float,
    arrival_times: Sequence[float],
    phases: Sequence[NamedPhase],
    arrived: int,
    in_flight_at_end: int,
) -> list[dict[str, Any]]:
    """Per phase: the arrivals due in it, those that met the SLO, what the gate did to them.

    Of the ``arrived`` first arrivals; ``gate``: let in after waiting, refused with a 503.

    A request a process dealt with counts, arrived and met alike, in the phase of its second
    of arrival as the process counted it (``by_arrival_second``), so that an act never counts
    a request as met that it does not count as arrived (a second that straddles two acts goes
    to the act of its middle); an arrival no process dealt with (it fell while the server was
    down) counts in the phase of its due time. The last phase's judged arrivals leave out what
    the end cut off, as the run's totals do. The gate's refusals are among the arrivals and the
    misses: a 503 is a request that did not meet the SLO.
    """
    starts = [phase.start_s for phase in phases]

    def phase_of(t: float) -> int:
        return max(0, bisect.bisect_right(starts, t) - 1)

    met = [0] * len(phases)
    due = [0] * len(phases)
    waited = [0] * len(phases)
    refused = [0] * len(phases)
    dealt_with: set[int] = set()
    for line in lines:
        load = line.get("load")
        if load:
            dealt_with.update(range(load["first"], load["next"]))
        ready_at = line.get("ready_at")
        if ready_at is None:
            continue
        for second, requests, good in line.get("by_arrival_second", []):
            # The middle of the second, in the workload's time.
            index = phase_of(ready_at + second + 0.5 - origin)
            due[index] += requests
            met[index] += good
        for second, queued, turned_away in (line.get("gate") or {}).get("by_arrival_second", []):
            index = phase_of(ready_at + second + 0.5 - origin)
            waited[index] += queued
            refused[index] += turned_away
    for number, at in enumerate(arrival_times[:arrived]):
        if number not in dealt_with:
            due[phase_of(at)] += 1
    if due:
        due[-1] -= in_flight_at_end
    return [
        {"arrived": n, "met_slo": good, "gate": {"waited": queued, "refused": turned_away}}
        for n, good, queued, turned_away in zip(due, met, waited, refused, strict=True)
    ]


def acts(
    phases: Sequence[NamedPhase],
    governed: Sequence[dict[str, Any]],
    static: Sequence[dict[str, Any]] | None,
) -> list[dict[str, Any]]:
    """The acts side by side: SLO attainment with the governor and without it (None: unknown)."""
    rows = []
    for index, phase in enumerate(phases):
        with_ = governed[index]
        without = static[index] if static is not None and index < len(static) else None
        rows.append(
            {
                "name": phase.name,
                "from_s": phase.start_s,
                "to_s": phase.start_s + phase.duration_s,
                "with_governor": {**with_, "slo_attainment": _share(with_)},
                "without_governor": (
                    None if without is None else {**without, "slo_attainment": _share(without)}
                ),
            }
        )
    return rows


def _share(counts: dict[str, Any]) -> float | None:
    arrived = counts["arrived"]
    return counts["met_slo"] / arrived if arrived > 0 else None
