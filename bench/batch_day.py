"""Issue 18's day without the governor: no batch work, and a fixed nightly cron window.

Runs ``simulator/workloads/diurnal-24h.yaml`` (a compressed 24-hour day of the Azure
conversation trace and a batch backlog at priority 1000) through the simulated engine with
``--scheduling-policy priority`` and vLLM's default settings, once per baseline, and prints
per hour of the day: online requests, SLO attainment, TTFT/TPOT p95, batch output tokens
completed and the GPU busy share; then the day's totals and the cost per million output
tokens at a stated GPU-hour price. The governor's own window is the third column still to
come (it drives the simulated server through the daemon).

    .venv/bin/python -m bench.batch_day [--profiles A,B] [--cron-hours 1-6]
        [--cron-concurrency 64] [--gpu-hour-usd 2.5] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from simulator.batch_windows import Window, closed, nightly, run_with_batch_window
from simulator.diurnal_workloads import batch_jobs, load_diurnal, online_arrivals
from simulator.engine import Engine
from simulator.lanes import lanes_by_period, lanes_report
from simulator.profiles import load_profile
from simulator.settings import EngineSettings, SchedulingPolicy
from simulator.shipped import WORKLOAD_DIR

# GPUs per engine, for the cost: the profile names say the tensor-parallel size.
GPUS = {"llama-3.1-8b-h100-tp1": 1, "llama-3.3-70b-h100-tp4": 4}


def run_day(profile_name: str, window: Window) -> dict[str, Any]:
    """One day through one engine; the per-hour table and the day's totals."""
    spec = load_diurnal(WORKLOAD_DIR / "diurnal-24h.yaml")
    profile = load_profile(profile_name)
    settings = EngineSettings.defaults(profile, scheduling_policy=SchedulingPolicy.PRIORITY)
    run_interval = spec.hour_s / 10
    started = time.process_time()
    run = run_with_batch_window(
        Engine(profile, settings),
        online_arrivals(spec, profile=profile_name),
        batch_jobs(spec),
        window,
        until=spec.duration_s,
        sample_interval_s=run_interval,
    )
    cpu_s = time.process_time() - started
    hours = lanes_by_period(run.finished, spec.hour_s)[:24]
    for index, hour in enumerate(hours):
        # A sample at t covers (t - interval, t]; idle stretches the run jumped over have none.
        shares = [s.busy_share for s in run.samples if (s.t - 1e-9) // spec.hour_s == index]
        hour["busy_share"] = sum(shares) / (spec.hour_s / run_interval)
    totals = lanes_report(run.finished)
    busy_s = run.engine.lifetime_totals(run.now).busy_s
    return {
        "profile": profile_name,
        "cpu_s": cpu_s,
        "hours": hours,
        "online": totals["online"],
        "batch": totals["batch"],
        "busy_share": busy_s / spec.duration_s,
        "duration_s": spec.duration_s,
    }


def cost_per_million(day: dict[str, Any], gpu_hour_usd: float) -> float | None:
    """USD per million output tokens (online and batch) over the day."""
    tokens = int(day["online"]["output_tokens"]) + int(day["batch"]["output_tokens"])
    if not tokens:
        return None
    gpu_hours = float(day["duration_s"]) / 3600 * GPUS.get(str(day["profile"]), 1)
    return gpu_hours * gpu_hour_usd / (tokens / 1e6)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def print_table(name: str, day: dict[str, Any], gpu_hour_usd: float) -> None:
    """The per-hour table and the totals of one baseline."""
    print(f"\n== {day['profile']}: {name} ({day['cpu_s']:.1f} s CPU)")
    print("hour  online  slo%    ttft95ms tpot95ms  batch_tok  busy%")
    for hour in day["hours"]:
        online, batch = hour["online"], hour["batch"]
        slo = online["slo_attainment"]
        print(
            f"{hour['period']:>4} {online['requests']:>7} "
            f"{'-' if slo is None else f'{100 * slo:.2f}':>7} "
            f"{_ms(online['ttft_p95_s']):>8} {_ms(online['tpot_p95_s']):>8} "
            f"{batch['output_tokens']:>10} {100 * hour['busy_share']:>6.1f}"
        )
    cost = cost_per_million(day, gpu_hour_usd)
    print(
        f"day: online SLO {100 * (day['online']['slo_attainment'] or 0):.3f}%, "
        f"TTFT p95 {_ms(day['online']['ttft_p95_s'])} ms, "
        f"batch tokens {day['batch']['output_tokens']:,}, busy {100 * day['busy_share']:.1f}%, "
        f"${cost:.4f} per M output tokens at ${gpu_hour_usd}/GPU-hour"
        if cost is not None
        else "day: no tokens"
    )


def main() -> None:
    """Run the baselines and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default=",".join(GPUS))
    parser.add_argument("--cron-hours", default="1-6")
    parser.add_argument("--cron-concurrency", type=int, default=64)
    parser.add_argument("--gpu-hour-usd", type=float, default=2.5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    start, end = (float(part) for part in args.cron_hours.split("-"))
    spec = load_diurnal(WORKLOAD_DIR / "diurnal-24h.yaml")
    baselines: dict[str, Window] = {
        "no batch": closed,
        f"cron {args.cron_hours} h x {args.cron_concurrency}": nightly(
            start_hour=start, end_hour=end, concurrency=args.cron_concurrency, hour_s=spec.hour_s
        ),
    }
    results: dict[str, dict[str, Any]] = {}
    for profile_name in args.profiles.split(","):
        for name, window in baselines.items():
            day = run_day(profile_name, window)
            print_table(name, day, args.gpu_hour_usd)
            results[f"{profile_name}/{name}"] = day
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
