"""What inflates online TTFT when batch work shares the engine, hour by hour (issue 18).

Each hour of ``simulator/workloads/diurnal-24h.yaml`` is run on its own (its online arrivals,
an engine that starts empty, priority scheduling, vLLM's defaults) with a fixed batch lane:
``--widths`` requests in flight, topped up every ``--tick`` seconds as a batch runner does, or
paced (at most one start every ``--spacings`` seconds, as the governor's ``start_spacing``);
with the day's batch backlog (``day``) or with batch requests of one length (``P:O``, prompt
and output tokens). Per run: the hour's online TTFT p95 and its rise over the same hour without
batch work, online TPOT p95 and SLO attainment, online requests preempted, batch output tokens
completed, and the share of the hour the engine spent on batch prefill (the completed batch
requests' prompt tokens x the profile's prefill cost per token).

The causes are told apart by the batch lengths: requests of 16 prompt tokens load the engine
with decodes and their context and almost no prefill; longer prompts add prefill at the same
width. Preemption shows in the online requests preempted.

``--best`` then answers the issue's question for every hour of the day: the most batch tokens
any width (paced or not) completes with the hour's online TTFT p95 at most 10% above its
no-batch value, and their sum over the day: the best any window of this lane can do at this
engine's settings (each hour on its own, so an upper bound: a real window pays to learn it).

    .venv/bin/python -m bench.batch_ttft_causes --profile llama-3.1-8b-h100-tp1 \\
        --hours 3,12 --widths 0,1,2,4,8,16,32 --mixes day,16:250,1500:250,4000:250 \\
        --spacings 0,0.2 [--best] [--setting long_prefill_token_threshold=512] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.arrivals import Arrival
from simulator.batch_windows import run_with_batch_window
from simulator.diurnal_workloads import DiurnalSpec, batch_jobs, load_diurnal, online_arrivals
from simulator.engine import Engine
from simulator.lanes import Lane, lane_of, lanes_by_period
from simulator.profiles import load_profile
from simulator.settings import EngineSettings, SchedulingPolicy
from simulator.shipped import WORKLOAD_DIR

GOAL_TTFT_RISE = 0.10
BATCH_PRIORITY = 1000
FIXED_JOBS = 200_000  # more than any hour completes


@dataclass(frozen=True, slots=True)
class FixedLane:
    """One fixed batch lane: its width, its pace (0: none) and its requests' lengths."""

    width: int
    spacing_s: float
    mix: str


def hour_arrivals(spec: DiurnalSpec, profile: str, hour: int) -> list[Arrival]:
    """The online arrivals of one hour of the day, from 0 s."""
    start, end = hour * spec.hour_s, (hour + 1) * spec.hour_s
    return [
        Arrival(a.arrived_at - start, a.prompt_tokens, a.output_tokens, a.priority)
        for a in online_arrivals(spec, profile=profile)
        if start <= a.arrived_at < end
    ]


def backlog_of(spec: DiurnalSpec, mix: str) -> list[Arrival]:
    """The day's backlog (``day``), or requests of one length (``P:O``)."""
    if mix == "day":
        return batch_jobs(spec)
    prompt, output = (int(part) for part in mix.split(":"))
    return [Arrival(0.0, prompt, output, BATCH_PRIORITY)] * FIXED_JOBS


def run_hour(
    spec: DiurnalSpec,
    profile_name: str,
    online: Sequence[Arrival],
    backlog: Sequence[Arrival],
    lane: FixedLane,
    settings: dict[str, Any],
    tick_s: float,
) -> dict[str, Any]:
    """One hour through one engine with one fixed lane."""
    profile = load_profile(profile_name)
    engine_settings = EngineSettings.defaults(
        profile, scheduling_policy=SchedulingPolicy.PRIORITY, **settings
    )
    run = run_with_batch_window(
        Engine(profile, engine_settings),
        online,
        backlog if lane.width else [],
        lambda _: lane.width,
        until=spec.hour_s,
        tick_s=tick_s,
        sample_interval_s=spec.hour_s,
        start_spacing_s=lane.spacing_s,
    )
    hour = lanes_by_period(run.finished, spec.hour_s)[0]
    online_records = [r for r in run.finished if lane_of(r.priority) is Lane.ONLINE]
    batch_prompt = hour["batch"]["prompt_tokens"]  # of the batch requests completed
    return {
        "width": lane.width,
        "spacing_s": lane.spacing_s,
        "mix": lane.mix,
        "online": hour["online"],
        "online_preempted": sum(1 for r in online_records if r.num_preemptions),
        "batch_output_tokens": hour["batch"]["output_tokens"],
        "batch_prefill_share": batch_prompt
        * profile.beta1_us_per_prefill_token
        * 1e-6
        / spec.hour_s,
    }


def _line(profile: str, hour: int, result: dict[str, Any], base: float | None) -> str:
    online = result["online"]
    ttft = online["ttft_p95_s"]
    rise = "-" if not base or ttft is None else f"{100 * (ttft / base - 1):+6.1f}%"
    return (
        f"{profile[:14]} {hour:02d}:00 {result['mix']:>9} pace {result['spacing_s']:>4g} s "
        f"w {result['width']:>3}  ttft95 {1000 * (ttft or 0):7.1f} ms {rise:>8}  "
        f"tpot95 {1000 * (online['tpot_p95_s'] or 0):5.1f} ms  "
        f"slo {100 * (online['slo_attainment'] or 0):6.2f}%  "
        f"online preempted {result['online_preempted']:>3}  "
        f"batch tokens {result['batch_output_tokens']:>8}  "
        f"batch prefill {100 * result['batch_prefill_share']:5.1f}%"
    )


def sweep(
    spec: DiurnalSpec,
    profile: str,
    hours: Sequence[int],
    lanes: Sequence[FixedLane],
    settings: dict[str, Any],
    tick_s: float,
) -> dict[int, list[dict[str, Any]]]:
    """Every lane in every hour, each against the hour without batch work (printed as it goes)."""
    results: dict[int, list[dict[str, Any]]] = {}
    backlogs = {mix: backlog_of(spec, mix) for mix in {lane.mix for lane in lanes}}
    for hour in hours:
        online = hour_arrivals(spec, profile, hour)
        base = run_hour(spec, profile, online, [], FixedLane(0, 0.0, "-"), settings, tick_s)
        base_ttft = base["online"]["ttft_p95_s"]
        results[hour] = [base]
        print(_line(profile, hour, base, base_ttft), flush=True)
        for lane in lanes:
            if lane.width == 0:
                continue
            result = run_hour(spec, profile, online, backlogs[lane.mix], lane, settings, tick_s)
            ttft = result["online"]["ttft_p95_s"]
            result["ttft_p95_rise"] = (
                None if not base_ttft or ttft is None else ttft / base_ttft - 1
            )
            results[hour].append(result)
            print(_line(profile, hour, result, base_ttft), flush=True)
    return results


def best_within_budget(results: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per hour, the lane with the most batch tokens within the TTFT budget; the day's sum."""
    best: dict[int, dict[str, Any]] = {}
    for hour, runs in results.items():
        allowed = [
            run
            for run in runs
            if run["width"] == 0
            or (run["ttft_p95_rise"] is not None and run["ttft_p95_rise"] <= GOAL_TTFT_RISE)
        ]
        best[hour] = max(allowed, key=lambda run: run["batch_output_tokens"])
    return {
        "per_hour": {
            hour: {
                "width": run["width"],
                "spacing_s": run["spacing_s"],
                "batch_output_tokens": run["batch_output_tokens"],
                "ttft_p95_rise": run.get("ttft_p95_rise"),
            }
            for hour, run in best.items()
        },
        "day_batch_output_tokens": sum(run["batch_output_tokens"] for run in best.values()),
    }


def main() -> None:
    """Run the sweep, print it, and the best within the budget when asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="llama-3.1-8b-h100-tp1")
    parser.add_argument("--hours", default="3,12")
    parser.add_argument("--widths", default="0,1,2,4,8,16,32")
    parser.add_argument("--mixes", default="day")
    parser.add_argument("--spacings", default="0")
    parser.add_argument("--tick", type=float, default=0.2, help="top-up interval when unpaced")
    parser.add_argument("--setting", action="append", default=[], help="NAME=INT, e.g. a knob")
    parser.add_argument("--best", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    spec = load_diurnal(WORKLOAD_DIR / "diurnal-24h.yaml")
    hours = list(range(24)) if args.hours == "all" else [int(h) for h in args.hours.split(",")]
    settings = {name: int(value) for name, value in (s.split("=") for s in args.setting)}
    lanes = [
        FixedLane(int(width), float(spacing), mix)
        for mix in args.mixes.split(",")
        for spacing in args.spacings.split(",")
        for width in args.widths.split(",")
    ]
    started = time.monotonic()
    results = sweep(spec, args.profile, hours, lanes, settings, args.tick)
    output: dict[str, Any] = {
        "profile": args.profile,
        "settings": settings,
        "tick_s": args.tick,
        "hours": results,
    }
    if args.best:
        output["best"] = best_within_budget(results)
        for hour, run in output["best"]["per_hour"].items():
            print(
                f"best {hour:02d}:00: width {run['width']} pace {run['spacing_s']:g} s, "
                f"{run['batch_output_tokens']:,} batch tokens"
            )
        print(f"best day: {output['best']['day_batch_output_tokens']:,} batch output tokens")
    print(f"wall time {time.monotonic() - started:.0f} s")
    if args.json is not None:
        args.json.write_text(json.dumps(output, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
