"""Virtual-time speed of the simulated vLLM: simulated seconds per wall-clock second.

For each shipped profile, the shared one-hour Azure conversation trace is simulated to the
last completion with vLLM's default settings, and timed against a baseline measured in the
same run: reading and parsing the trace (the least any replay must do). The issue's goal is
"an hour of the shared trace in well under a minute".

    .venv/bin/python -m bench.sim_speed [--repeat 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from simulator.engine import Engine
from simulator.profiles import load_profile
from simulator.settings import EngineSettings
from simulator.trace_replay import read_trace
from simulator.virtual_time import VirtualRun

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "simulator" / "traces" / "azure-llm-2023-conv.csv"
PROFILES = ("llama-3.1-8b-h100-tp1", "llama-3.3-70b-h100-tp4")


@dataclass
class Speed:
    """One profile's measurement (best of the repeats)."""

    profile: str
    simulated_s: float
    wall_s: float
    steps: int
    simulated_s_per_wall_s: float
    baseline_parse_wall_s: float
    ratio_to_baseline: float


def best_of(repeat: int, action: Callable[[], object]) -> float:
    """The shortest wall time of ``repeat`` calls of ``action``."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def measure(profile_name: str, repeat: int) -> Speed:
    """Time one profile on the trace, and the parsing baseline next to it."""
    profile = load_profile(profile_name)
    settings = EngineSettings.defaults(profile)
    arrivals = read_trace(TRACE)
    baseline = best_of(repeat, lambda: read_trace(TRACE))
    runs: list[VirtualRun] = []

    def simulate() -> None:
        run = VirtualRun(Engine(profile, settings), arrivals)
        run.run()
        runs.append(run)

    wall = best_of(repeat, simulate)
    run = runs[-1]
    steps = run.engine.counters.steps if run.engine.counters else 0
    return Speed(
        profile=profile_name,
        simulated_s=round(run.now, 1),
        wall_s=round(wall, 2),
        steps=steps,
        simulated_s_per_wall_s=round(run.now / wall, 1),
        baseline_parse_wall_s=round(baseline, 3),
        ratio_to_baseline=round(wall / baseline, 1),
    )


def main() -> None:
    """Measure both profiles and print a table; optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results = [measure(name, args.repeat) for name in PROFILES]
    print(f"virtual-time speed on {TRACE.name}, default settings, best of {args.repeat}")
    header = (
        f"{'profile':<24} {'simulated s':>11} {'wall s':>7} {'steps':>8} {'sim s/wall s':>12} "
        f"{'parse s':>8} {'x parse':>8}"
    )
    print(header)
    for row in results:
        print(
            f"{row.profile:<24} {row.simulated_s:>11} {row.wall_s:>7} {row.steps:>8} "
            f"{row.simulated_s_per_wall_s:>12} {row.baseline_parse_wall_s:>8} "
            f"{row.ratio_to_baseline:>8}"
        )
    goal = all(row.wall_s < 60 for row in results)
    print(f"goal (an hour of the trace in well under a minute): {'met' if goal else 'NOT met'}")
    if args.json:
        args.json.write_text(json.dumps([asdict(row) for row in results], indent=2))


if __name__ == "__main__":
    main()
