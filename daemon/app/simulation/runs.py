"""One run of one controller on one seed, and many of them over worker processes.

A :class:`Job` names everything a run needs (picklable); :func:`execute` builds the workload,
the engine, the gate when the controller has one, and the controller, drives them second by
second until the workload's end, lets the engine finish what it holds, and returns the
:class:`RunTally`. The same seed gives the same arrivals to every controller, and a run is a
pure function of its job: the same job, the same tally.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from daemon.app.simulation.baselines import Limiter, NaiveScript, Static
from daemon.app.simulation.config import instance_of, load_simulation_config
from daemon.app.simulation.events import EventLog
from daemon.app.simulation.governed import Governing, govern, scratch_directory
from daemon.app.simulation.names import GOVERNOR, LIMITERS, NAIVE, RESTART_ONLY, STATIC_DEFAULT
from daemon.app.simulation.tallies import RunTally, tally
from daemon.app.simulation.workloads import Workload, load
from daemon.core.settings import GovernorConfig
from daemon.policy.loading import load_policies
from daemon.sources.registry import signal_registry
from simulator.arrivals import Arrival
from simulator.engine import Engine
from simulator.gate import Gate
from simulator.profiles import EngineProfile, load_profile
from simulator.settings import EngineSettings
from simulator.virtual_time import VirtualRun

# HAProxy's `timeout queue` in examples/haproxy/haproxy.cfg: a request waits at most this long.
QUEUE_TIMEOUT_S = 1.5
STATIC_PREFIX = "static:"  # static:<max_num_seqs>x<max_num_batched_tokens>, a grid point
APPROVE, REJECT = "approve", "reject"  # what the simulated approver clicks


class Controller(Protocol):
    """What a driver needs of a controller."""

    log: EventLog

    def step(self, now: float) -> None:
        """One second of virtual time has passed."""
        ...


@dataclass(frozen=True, slots=True)
class Job:
    """Everything one run needs.

    Attributes:
        controller: ``static-default``, ``static:SEQSxTOKENS``, ``naive-script``, a limiter,
            ``governor`` or ``governor-restart-only``.
        profile: A shipped profile name or a profile file.
        trace: A trace CSV, or None.
        spec: A workload spec, or None.
        seed: The workload's seed.
        policy_dirs: The governor's policies.
        config: The governor's config.toml, or None for the built-in simulation config.
        approval_delay_s: Seconds before a proposal is answered.
        approval_answer: ``approve`` or ``reject``.
        start: The server's settings when the run starts, ``(max_num_seqs,
            max_num_batched_tokens)``, for every controller but a grid point (None: vLLM's
            defaults on the profile). ``static-default`` is then these settings kept: the
            deployment left as it is.
    """

    controller: str
    profile: str
    trace: Path | None
    spec: Path | None
    seed: int
    policy_dirs: tuple[Path, ...] = ()
    config: Path | None = None
    approval_delay_s: float = 60.0
    approval_answer: str = APPROVE
    start: tuple[int, int] | None = None


def static_name(max_num_seqs: int, max_num_batched_tokens: int) -> str:
    """The controller name of one grid point."""
    return f"{STATIC_PREFIX}{max_num_seqs}x{max_num_batched_tokens}"


def execute(job: Job) -> RunTally:
    """Run one job to the end (see the module docstring)."""
    profile = load_profile(job.profile)
    workload = load(trace=job.trace, spec=job.spec, seed=job.seed, profile=profile.name)
    settings = starting_settings(job, profile)
    if job.controller.startswith(STATIC_PREFIX):
        seqs, tokens = job.controller.removeprefix(STATIC_PREFIX).split("x")
        settings = EngineSettings.defaults(
            profile, max_num_seqs=int(seqs), max_num_batched_tokens=int(tokens)
        )
    gated = job.controller in LIMITERS or job.controller == GOVERNOR
    gate = Gate[Arrival](settings.max_num_seqs, QUEUE_TIMEOUT_S) if gated else None
    run = VirtualRun(Engine(profile, settings), workload.arrivals, gate=gate)
    if job.controller in (GOVERNOR, RESTART_ONLY):
        log = _governed(job, run, workload, gated=gated)
    else:
        controller = _controller(job, run)
        now = 0.0
        while now < workload.duration_s:
            now += 1.0
            run.run_until(now)
            controller.step(now)
        log = controller.log
    run.run()
    result = tally(job.controller, job.seed, run, workload, log.events)
    result.settings = {
        "max_num_seqs": settings.max_num_seqs,
        "max_num_batched_tokens": settings.max_num_batched_tokens,
    }
    return result


def starting_settings(job: Job, profile: EngineProfile) -> EngineSettings:
    """The server's settings at the start of ``job``'s run: its ``start``, else the defaults."""
    if job.start is None:
        return EngineSettings.defaults(profile)
    seqs, tokens = job.start
    return EngineSettings.defaults(profile, max_num_seqs=seqs, max_num_batched_tokens=tokens)


def starting_name(job: Job, profile: EngineProfile) -> str:
    """The grid point of the starting settings (``static:SEQSxTOKENS``)."""
    settings = starting_settings(job, profile)
    return static_name(settings.max_num_seqs, settings.max_num_batched_tokens)


def _controller(job: Job, run: VirtualRun) -> Controller:
    name = job.controller
    if name == NAIVE:
        return NaiveScript(run)
    if name in LIMITERS:
        return Limiter(run, name)
    if name == STATIC_DEFAULT or name.startswith(STATIC_PREFIX):
        return Static(run)
    message = f"unknown controller {name!r}"
    raise ValueError(message)


def check_governed(job: Job) -> GovernorConfig:
    """The governor's configuration and policies for ``job``, checked before anything runs.

    Raises:
        ConfigError: the configuration is broken (every problem, located).
        ValueError: it has no [[vllm]] instance, or a policy does not load.
    """
    config = load_simulation_config(job.config)
    instance_of(config)  # one [[vllm]] instance at least, or a clear error
    _check_policies(job, config)
    return config


def _governed(job: Job, run: VirtualRun, workload: Workload, *, gated: bool) -> EventLog:
    """The daemon's own Governor over the run (see :mod:`daemon.app.simulation.governed`)."""
    config = check_governed(job)
    policies = config.governor.model_copy(update={"policy_dirs": job.policy_dirs})
    with scratch_directory() as scratch:
        return govern(
            run,
            Path(scratch),
            config.model_copy(update={"governor": policies}),
            Governing(
                duration_s=workload.duration_s,
                gated=gated,
                approval_delay_s=job.approval_delay_s,
                approve=job.approval_answer == APPROVE,
            ),
        )


def _check_policies(job: Job, config: GovernorConfig) -> None:
    """Refuse policies that do not load, before anything runs (the daemon would run the rest).

    Raises:
        ValueError: every problem, located.
    """
    loaded = load_policies(
        job.policy_dirs, config.target_names(), config.envelopes(), signals=signal_registry(config)
    )
    if loaded.issues:
        problems = "; ".join(str(issue) for issue in loaded.issues)
        message = f"policies failed to load: {problems}"
        raise ValueError(message)


def execute_all(
    jobs: Sequence[Job],
    workers: int = 1,
    progress: Callable[[int, int, Job], None] | None = None,
) -> list[RunTally]:
    """Run every job (in ``workers`` processes when more than one), results in job order."""
    results: list[RunTally] = []
    if workers <= 1 or len(jobs) <= 1:
        for index, job in enumerate(jobs):
            results.append(execute(job))
            if progress is not None:
                progress(index + 1, len(jobs), job)
        return results
    # fork keeps the loaded modules (and spares a re-import per worker) where it exists.
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    context = multiprocessing.get_context(method)
    with context.Pool(processes=workers) as pool:
        for index, result in enumerate(pool.imap(execute, jobs)):
            results.append(result)
            if progress is not None:
                progress(index + 1, len(jobs), jobs[index])
    return results
