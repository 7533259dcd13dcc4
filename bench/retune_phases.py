"""From decision to verified change on the simulated vLLM under supervisord, phase by phase.

A ``sim serve`` runs under a real supervisord; the vLLM actuator (with the engine's SQLite
journal and signal windows over a live signal plane) applies a decision that moves
``max-num-seqs`` between 8 and 16, ``--repeat`` times. Each change is timed per phase (plan,
preflight, journal, write, drain, restart, ready, verify), and against a baseline measured in
the same run: the same ``supervisorctl restart`` run by hand, then polling until ``/health``
answers, which is the least any restart costs. The governor's own overhead is what it spends
beyond that baseline and its deliberate verification window.

    .venv/bin/python -m bench.retune_phases [--repeat 3] [--verify-window 2] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from actuators.vllm.actuator import VllmActuator
from daemon.api import DONE, ChangeRequest, Envelope, SystemClock, VllmInstance
from daemon.core.settings import (
    GovernorConfig,
    HostSourceSection,
    NvmlSourceSection,
    SourcesSection,
)
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.evaluation.signal_windows import StoreSignalWindows
from daemon.engine.runtime.supervisor import EternalTask, Readiness
from daemon.engine.storage.journal_store import SqliteJournal
from tests.support.supervised_sim import SupervisedSim, supervised_sim

PHASES = (
    "plan",
    "preflight",
    "baseline",
    "journal",
    "write",
    "drain",
    "restart",
    "ready",
    "verify",
)
OWN = ("plan", "preflight", "journal", "write", "drain")


@dataclass
class Result:
    """Medians over the repeats, seconds."""

    repeats: int
    verify_window_s: float
    phases_s: dict[str, float]
    decision_to_verified_s: float
    bare_restart_to_health_s: float
    governor_own_s: float
    ratio_without_verify_to_bare: float


def instance_of(sim: SupervisedSim, verify_window_s: float) -> VllmInstance:
    envelope = Envelope(min=1, max=64, max_step=64, min_dwell_s=0, hourly_budget=60)
    return VllmInstance(
        name="sim",
        url=sim.url,
        scrape_interval_s=0.5,
        config_path=sim.vllm_yaml,
        env_file=sim.env_file,
        restart_command=tuple(sim.restart_command()),
        restart_timeout_s=60.0,
        ready_timeout_s=60.0,
        verify_window_s=verify_window_s,
        knobs={"max_num_seqs": envelope},
    )


def bare_restart(sim: SupervisedSim) -> float:
    """``supervisorctl restart`` by hand, then poll /health: the least a restart costs."""
    started = time.perf_counter()
    subprocess.run(sim.restart_command(), check=True, capture_output=True, timeout=60)
    sim.wait_ready(60)
    return time.perf_counter() - started


async def governed(instance: VllmInstance, repeat: int, state: Path) -> list[dict[str, float]]:
    config = GovernorConfig(
        vllm=(instance,),
        sources=SourcesSection(
            nvml=NvmlSourceSection(enabled=False), host=HostSourceSection(enabled=False)
        ),
    )
    plane = SignalPlane(config, SystemClock(), CollectorRegistry())
    journal = SqliteJournal(state / "state.sqlite3", SystemClock())
    actuator = VllmActuator(journal, StoreSignalWindows(plane), SystemClock(), state)

    async def run(task: EternalTask) -> None:
        await task.run(Readiness())

    timings: list[dict[str, float]] = []
    async with asyncio.TaskGroup() as group:
        pollers = [group.create_task(run(task)) for task in plane.tasks()]
        await asyncio.sleep(instance.verify_window_s)  # a baseline window of scrapes
        for number in range(repeat):
            old, new = (8.0, 16.0) if number % 2 == 0 else (16.0, 8.0)
            request = ChangeRequest("sim", "bench", {"max_num_seqs": new}, {"max_num_seqs": old})
            started = time.perf_counter()
            result = await actuator.apply(instance, request)
            total = time.perf_counter() - started
            if result.state != DONE:
                message = f"the change ended {result.state}: {result.outcome}"
                raise RuntimeError(message)
            timings.append({**result.timings, "total": total})
        for poller in pollers:
            poller.cancel()
    journal.close()
    return timings


def measure(repeat: int, verify_window_s: float) -> Result:
    with (
        tempfile.TemporaryDirectory(prefix="vg-bench-") as directory,
        supervised_sim(Path(directory), "max-num-seqs: 8\n") as sim,
    ):
        instance = instance_of(sim, verify_window_s)
        changes = asyncio.run(governed(instance, repeat, Path(directory)))
        bare = statistics.median(bare_restart(sim) for _ in range(repeat))
    phases = {
        phase: round(statistics.median(t.get(phase, 0.0) for t in changes), 3) for phase in PHASES
    }
    total = statistics.median(t["total"] for t in changes)
    own = sum(phases[phase] for phase in OWN)
    return Result(
        repeats=repeat,
        verify_window_s=verify_window_s,
        phases_s=phases,
        decision_to_verified_s=round(total, 3),
        bare_restart_to_health_s=round(bare, 3),
        governor_own_s=round(own, 3),
        ratio_without_verify_to_bare=round((total - phases["verify"]) / bare, 2),
    )


def main() -> None:
    """Measure and print; optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--verify-window", type=float, default=2.0)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    # The signal plane warns while the sim restarts; that is the point, not news.
    logging.basicConfig(level=logging.ERROR)
    result = measure(args.repeat, args.verify_window)
    print(f"decision to verified change, sim under supervisord, median of {result.repeats}")
    for phase, seconds in result.phases_s.items():
        print(f"  {phase:<10} {seconds:>7.3f} s")
    print(f"  {'total':<10} {result.decision_to_verified_s:>7.3f} s")
    print(f"bare 'supervisorctl restart' to /health 200: {result.bare_restart_to_health_s:.3f} s")
    print(f"governor's own work (plan .. drain): {result.governor_own_s:.3f} s")
    print(
        "governed change without the verification window / bare restart: "
        f"{result.ratio_without_verify_to_bare:.2f}x"
    )
    if args.json:
        args.json.write_text(json.dumps(asdict(result), indent=2))


if __name__ == "__main__":
    main()
