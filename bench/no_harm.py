"""No harm at the gate: the governor beside static-default on workloads a gate can only hurt.

Issue 16's rule for the admission gate is to never turn away more requests than the server
alone would have failed. The proof's workloads reward a gate (bursts, overload); these do not:
clumped chat on a server with room to spare, retrieval-augmented prompts whose TTFT is their
own prefill, code completion whose TPOT a smaller batch does shorten. Each runs in
``vllm-governor simulate``'s session (the daemon's own Governor in virtual time), static-default
and the limiters beside it on the same seeds, and prints each controller's goodput (requests/s
within the SLO) and its ratio to static-default, per seed and overall, and the refusals at the
gate. The goal: the governor at 1.0x static-default or better on each.

    .venv/bin/python -m bench.no_harm [--seeds 2] [--jobs 2] [--profiles A,B] [--workloads A,B]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from daemon.app.simulation.names import GOVERNOR, LIMITERS, STATIC_DEFAULT
from daemon.app.simulation.runs import Job
from daemon.app.simulation.session import Session, simulate
from daemon.shipped import default_pack

WORKLOADS_DIR = Path(__file__).resolve().parents[1] / "simulator" / "workloads"
WORKLOADS = ("chat-clumps", "rag-steady", "code-steady")
PROFILES = ("llama-3.1-8b-h100-tp1", "llama-3.3-70b-h100-tp4")
CONTROLLERS = (STATIC_DEFAULT, *LIMITERS, GOVERNOR)


def run_one(workload: str, profile: str, seeds: int, jobs: int) -> dict[str, Any]:
    """Every controller on one workload and profile; the report of ``simulate``."""
    spec = WORKLOADS_DIR / f"{workload}.yaml"
    template = Job("", profile, None, spec, 1, (default_pack(),))
    session = Session(template, tuple(range(1, seeds + 1)), CONTROLLERS, jobs)
    report, _ = simulate(session)
    return report


def table(report: Mapping[str, Any]) -> str:
    """Goodput, its ratio to static-default per seed and overall, and the gate's refusals."""
    controllers = report["controllers"]
    default = controllers[STATIC_DEFAULT]
    lines = [f"{'controller':16s} {'goodput/s':>9s} {'SLO':>7s} {'x default':>9s}  per seed"]
    for name in CONTROLLERS:
        row = controllers[name]
        per_seed = [
            mine["goodput_rps"] / max(theirs["goodput_rps"], 1e-9)
            for mine, theirs in zip(row["per_seed"], default["per_seed"], strict=True)
        ]
        ratio = row["goodput_rps"] / max(default["goodput_rps"], 1e-9)
        refused = sum(phase["refused_or_aborted"] for phase in row["phases"].values())
        lines.append(
            f"{name:16s} {row['goodput_rps']:9.3f} {row['slo_attainment']:7.1%} {ratio:8.3f}x  "
            + " ".join(f"{value:.3f}" for value in per_seed)
            + f"  (refused or aborted: {refused:.0f} a run)"
        )
    return "\n".join(lines)


def main() -> None:
    """Run each workload on each profile and print the tables and the goal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--profiles", default=",".join(PROFILES))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    args = parser.parse_args()
    worst: list[tuple[float, str]] = []
    for profile in args.profiles.split(","):
        for workload in args.workloads.split(","):
            started = time.monotonic()
            report = run_one(workload, profile, args.seeds, args.jobs)
            print(f"== {workload} on {profile}, seeds 1-{args.seeds}")
            print(table(report))
            print(f"({time.monotonic() - started:.0f} s of wall time)\n", flush=True)
            controllers = report["controllers"]
            ratio = controllers[GOVERNOR]["goodput_rps"] / max(
                controllers[STATIC_DEFAULT]["goodput_rps"], 1e-9
            )
            worst.append((ratio, f"{workload} on {profile}"))
    ratio, where = min(worst)
    verdict = "met" if ratio >= 1.0 else "MISSED"
    print(f"governor >= 1.0x static-default everywhere: {verdict} (lowest {ratio:.3f}x, {where})")


if __name__ == "__main__":
    main()
