"""One ``simulate`` session: the jobs of every wanted controller and seed, run, then reported."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from daemon.app.simulation.names import (
    BASELINES,
    BEST_STATIC,
    GOVERNOR,
    PER_PHASE,
    RESTART_ONLY,
    STATIC_DEFAULT,
)
from daemon.app.simulation.reports import build
from daemon.app.simulation.runs import (
    Job,
    check_governed,
    execute_all,
    starting_name,
    static_name,
)
from daemon.app.simulation.tallies import RunTally
from daemon.app.simulation.workloads import load
from simulator.profiles import load_profile

# The best-static grid: max-num-seqs x max-num-batched-tokens, kept small (12 runs a seed).
GRID_SEQS = (64, 128, 256, 1024)
GRID_TOKENS = (2048, 8192, 16384)


@dataclass(frozen=True, slots=True)
class Session:
    """What to simulate.

    Attributes:
        template: A job with everything but the controller and the seed.
        seeds: The workload's seeds.
        controllers: The wanted names (of :data:`BASELINES`).
        workers: Worker processes.
        grid_seqs: The best-static grid's ``max_num_seqs`` values.
        grid_tokens: Its ``max_num_batched_tokens`` values.
    """

    template: Job
    seeds: tuple[int, ...]
    controllers: tuple[str, ...]
    workers: int = 1
    grid_seqs: tuple[int, ...] = GRID_SEQS
    grid_tokens: tuple[int, ...] = GRID_TOKENS


def check_controllers(names: Sequence[str]) -> None:
    """Refuse an unknown controller name, naming the known ones.

    Raises:
        ValueError: an unknown name.
    """
    unknown = [name for name in names if name not in BASELINES]
    if unknown:
        message = f"unknown controller(s) {', '.join(unknown)}; known: {', '.join(BASELINES)}"
        raise ValueError(message)


def jobs_of(session: Session) -> list[Job]:
    """Every run the session needs (the grid once, shared by both best-static entries)."""
    names: list[str] = []
    for name in session.controllers:
        if name in (BEST_STATIC, PER_PHASE):
            grid = ((s, t) for s in session.grid_seqs for t in session.grid_tokens)
            names.extend(static_name(s, t) for s, t in grid)
        elif name != STATIC_DEFAULT:
            names.append(name)
    default = starting_name(session.template, load_profile(session.template.profile))
    if STATIC_DEFAULT in session.controllers and default not in names:
        names.insert(0, STATIC_DEFAULT)
    unique = list(dict.fromkeys(names))
    return [
        replace(session.template, controller=name, seed=seed)
        for name in unique
        for seed in session.seeds
    ]


def simulate(session: Session) -> tuple[dict[str, Any], dict[str, list[RunTally]]]:
    """Run the session; return the report and the tallies by controller."""
    check_controllers(session.controllers)
    if any(name in (GOVERNOR, RESTART_ONLY) for name in session.controllers):
        check_governed(session.template)  # a broken config fails now, not after the baselines
    jobs = jobs_of(session)
    results = execute_all(jobs, session.workers, _progress)
    by_controller: dict[str, list[RunTally]] = defaultdict(list)
    for result in results:
        by_controller[result.controller].append(result)
    profile = load_profile(session.template.profile)
    default = starting_name(session.template, profile)
    if STATIC_DEFAULT in session.controllers and default in by_controller:
        by_controller[STATIC_DEFAULT] = by_controller[default]
    template = session.template
    workload = load(
        trace=template.trace, spec=template.spec, seed=session.seeds[0], profile=profile.name
    )
    report = build(
        by_controller,
        profile=profile.name,
        workload=workload.name,
        seeds=session.seeds,
        phases=workload.phases,
        bursts=workload.bursts,
        wanted=session.controllers,
    )
    return report, dict(by_controller)


def _progress(done: int, total: int, job: Job) -> None:
    print(f"[{done}/{total}] {job.controller} seed {job.seed}", file=sys.stderr, flush=True)
