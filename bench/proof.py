"""The proof: the default pack against the alternatives, both profiles, 5 seeds, one run.

Runs ``vllm-governor simulate``'s session on ``simulator/workloads/proof-four-phases.yaml``
(steady 0.6 of capacity, a diurnal ramp, 2-3x bursts, a long-tail mix) for every controller,
then prints the issue's goals as ratios against baselines measured in the same run, and
writes the JSON of both profiles and one PNG plot per profile.

    .venv/bin/python -m bench.proof [--seeds 5] [--jobs 2] [--json PATH] [--plot-dir DIR]
        [--profiles A,B] [--summary PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from daemon.app.simulation.names import (
    BASELINES,
    BEST_STATIC,
    GOVERNOR,
    LIMITERS,
    NAIVE,
    RESTART_ONLY,
    STATIC_DEFAULT,
)
from daemon.app.simulation.reports import plot, table
from daemon.app.simulation.runs import Job
from daemon.app.simulation.session import Session, simulate
from daemon.shipped import default_pack

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "simulator" / "workloads" / "proof-four-phases.yaml"
PROFILES = ("llama-3.1-8b-h100-tp1", "llama-3.3-70b-h100-tp4")
HOUR_S = 3600.0


def goals(report: dict[str, Any]) -> list[str]:
    """The issue's goals for the governor, each with its measured value."""
    c = report["controllers"]
    gov, static, naive, best = c[GOVERNOR], c[STATIC_DEFAULT], c[NAIVE], c[BEST_STATIC]
    return [
        f"SLO attainment (goal >= 97%): {gov['slo_attainment'] * 100:.1f}%",
        f"goodput vs static-default (goal >= 1.3x): {_x(gov, static)}",
        "goodput vs static-default in bursts / long-tail: "
        f"{_x(gov, static, 'bursts')} / {_x(gov, static, 'long-tail')}",
        f"goodput vs naive-script (goal >= 1.5x): {_x(gov, naive)}",
        f"restarts: governor {gov['restarts']:.1f}, naive-script {naive['restarts']:.1f} "
        "(goal: >= 5x fewer)",
        f"steady goodput vs best-static (goal within 5%): {_x(gov, best, 'steady')}",
        f"whole-run goodput vs best-static (goal > 1.0x): {_x(gov, best)} "
        f"(best point {best.get('grid_point')})",
        f"reversals within 5 min (goal 0): {gov['reversals']:.1f}",
        f"restarts per hour outside long-tail (goal <= 1): {_outside_long_tail(gov):.2f}",
        f"time to react to the 3x burst (goal < 10 s): {_s(gov['time_to_react_s'])}; "
        f"to recover: {_s(gov['time_to_recover_s'])}",
        "two-speed vs restart-only vs limiters, goodput/s and SLO: "
        + ", ".join(
            f"{name} {c[name]['goodput_rps']:.2f} ({c[name]['slo_attainment'] * 100:.1f}%)"
            for name in (GOVERNOR, RESTART_ONLY, *LIMITERS)
            if name in c
        ),
    ]


def _x(entry: dict[str, Any], base: dict[str, Any], phase: str | None = None) -> str:
    a = entry if phase is None else entry["phases"][phase]
    b = base if phase is None else base["phases"][phase]
    return f"{a['goodput_rps'] / b['goodput_rps']:.2f}x" if b["goodput_rps"] else "-"


def _s(value: float | None) -> str:
    return "none" if value is None else f"{value:.1f} s"


def _outside_long_tail(entry: dict[str, Any]) -> float:
    phases = {n: p for n, p in entry["phases"].items() if n != "long-tail"}
    span = sum(p["end_s"] - p["start_s"] for p in phases.values())
    return sum(p["restarts"] for p in phases.values()) / (span / HOUR_S) if span else 0.0


def main() -> None:
    """Run both profiles and print the goals."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, default=Path("proof.json"))
    parser.add_argument("--plot-dir", type=Path, default=Path())
    parser.add_argument("--profiles", default=",".join(PROFILES))
    parser.add_argument("--summary", type=Path, help="also write the JSON without per-seed data")
    args = parser.parse_args()
    reports: dict[str, Any] = {}
    for profile in args.profiles.split(","):
        started = time.monotonic()
        template = Job("", profile, None, WORKLOAD, 1, (default_pack(),))
        session = Session(template, tuple(range(1, args.seeds + 1)), BASELINES, args.jobs)
        report, tallies = simulate(session)
        report["wall_s"] = time.monotonic() - started
        reports[profile] = report
        print(table(report))
        print(*goals(report), sep="\n")
        print(f"({report['wall_s']:.0f} s of wall time)\n", flush=True)
        plot(report, tallies, args.plot_dir / f"proof-{profile}.png")
        args.json.write_text(json.dumps(reports, indent=2) + "\n")
        if args.summary is not None:
            args.summary.write_text(json.dumps(summary(reports), indent=2) + "\n")


def summary(reports: dict[str, Any]) -> dict[str, Any]:
    """The reports without their per-seed figures and grid: what the docs keep."""
    kept: dict[str, Any] = {}
    for profile, report in reports.items():
        controllers = {
            name: {key: value for key, value in entry.items() if key != "per_seed"}
            for name, entry in report["controllers"].items()
        }
        rest = {key: value for key, value in report.items() if key not in ("controllers", "grid")}
        kept[profile] = {"controllers": controllers, **rest, "goals": goals(report)}
    return kept


if __name__ == "__main__":
    main()
