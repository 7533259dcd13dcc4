"""Issue 18's day: no batch work, a fixed nightly cron window, and the governor's window.

Runs ``simulator/workloads/diurnal-24h.yaml`` (a compressed 24-hour day of the Azure
conversation trace and a batch backlog at priority 1000) through the simulated engine with
``--scheduling-policy priority`` and vLLM's default settings, once per column:

- **no batch**: the backlog is never sent;
- **cron**: a fixed nightly window (01:00-06:00 at 64 by default), a runner that tops the lane
  up and never cuts a request off (:mod:`simulator.batch_windows`);
- **governor**: the daemon's own Governor with the example batch-window policy
  (``examples/policies/batch-window.yaml``, or ``--policies``), taking the backlog as job files
  in its inbox and sending them through its batch lane (:mod:`daemon.app.simulation.batch_day`).
  The example's pace reads the instance's prefill cost per token; it is set from the profile
  (:func:`profiled_example`), as an operator sets it from their server. With
  ``--prefill-piece-tokens N`` the lane prefills each batch prompt in pieces of N tokens
  through the prefix cache (``[batch] prefill_piece_tokens``).

Per hour of the day: online requests, SLO attainment, TTFT/TPOT p95 (online requests only:
batch records are accounted apart, :mod:`simulator.lanes`), batch output tokens completed and
the GPU busy share; then the day's totals, the work-based utilisation (tokens processed over
what the engine processes when saturated) and the cost per million output tokens at a stated
GPU-hour price; then the issue's goals, checked. ``--json`` and ``--plot`` write the figures.

    .venv/bin/python -m bench.batch_day [--profiles A,B] [--cron-hours 1-6]
        [--cron-concurrency 64] [--policies DIR] [--prefill-piece-tokens N]
        [--gpu-hour-usd 2.5] [--json PATH] [--table PATH] [--plot PREFIX]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from daemon.app.simulation.batch_day import DayPlan, govern_day
from simulator.arrivals import Arrival
from simulator.batch_windows import Window, closed, nightly, run_with_batch_window
from simulator.diurnal_workloads import DiurnalSpec, batch_jobs, load_diurnal, online_arrivals
from simulator.engine import Engine
from simulator.lanes import lanes_by_period, lanes_report
from simulator.profiles import load_profile
from simulator.settings import EngineSettings, SchedulingPolicy
from simulator.shipped import WORKLOAD_DIR
from simulator.virtual_time import VirtualRun

# GPUs per engine, for the cost: the profile names say the tensor-parallel size.
GPUS = {"llama-3.1-8b-h100-tp1": 1, "llama-3.3-70b-h100-tp4": 4}
# USD per H100 GPU-hour: the low end of the on-demand range of the specialty GPU clouds
# (CoreWeave, Lambda, Crusoe, RunPod: $2.49-3.99 for an H100 SXM 80GB in early 2026,
# pricegpu.pages.dev/blog/h100-vs-a100-cloud-price). The GPUs are paid for all day whatever
# they do, so only the ratio between the columns matters.
GPU_HOUR_USD = 2.5
EXAMPLE_POLICIES = Path(__file__).resolve().parent.parent / "examples" / "policies"
EXAMPLE_PREFILL_COST = "0.00001725"  # s per prompt token, in the example's start_spacing
# The saturated engine: the batch mix at max-num-seqs in flight, for this long.
SATURATION_S = 120.0
GOAL_TOKENS = 2.0  # x the cron window's batch tokens
GOAL_SLO_POINTS = 0.5  # online SLO attainment at most this far below the no-batch run
GOAL_TTFT_RISE = 0.10  # online TTFT p95 of any hour at most this much above the no-batch run


def _settings(profile_name: str) -> EngineSettings:
    return EngineSettings.defaults(
        load_profile(profile_name), scheduling_policy=SchedulingPolicy.PRIORITY
    )


def fixed_window_run(
    spec: DiurnalSpec, profile_name: str, window: Window, backlog: Sequence[Arrival]
) -> VirtualRun:
    """One day through one engine with a fixed window (none, cron)."""
    return run_with_batch_window(
        Engine(load_profile(profile_name), _settings(profile_name)),
        online_arrivals(spec, profile=profile_name),
        backlog if window is not closed else [],
        window,
        until=spec.duration_s,
        sample_interval_s=spec.hour_s / 10,
    )


def saturated_tok_s(profile_name: str, backlog: Sequence[Arrival]) -> float:
    """Tokens (prompt + output) per second of the engine kept full of the batch mix."""
    settings = _settings(profile_name)
    run = run_with_batch_window(
        Engine(load_profile(profile_name), settings),
        [],
        backlog,
        lambda _: settings.max_num_seqs,
        until=SATURATION_S,
        sample_interval_s=SATURATION_S,
    )
    totals = run.engine.lifetime_totals(run.now)
    return (totals.prompt_tokens + totals.generation_tokens) / run.now


def summarise(
    spec: DiurnalSpec,
    profile_name: str,
    run: VirtualRun,
    cpu_s: float,
    capacity_tok_s: float,
    pieces: Collection[str] = frozenset(),
) -> dict[str, Any]:
    """The per-hour table and the day's totals of one run.

    ``pieces`` are the ids of the lane's prefill pieces: their work counts (in the busy share
    and the tokens processed), their one sampled token each is no batch line's output.
    Tokens processed are those computed: a prompt's tokens found in the prefix cache (the
    pieces' leading parts) are counted by the engine's prompt counter, as vLLM's, but cost no
    prefill.
    """
    interval = run.samples[1].t - run.samples[0].t if len(run.samples) > 1 else spec.hour_s
    records = [record for record in run.finished if record.request_id not in pieces]
    hours = lanes_by_period(records, spec.hour_s)[:24]
    for index, hour in enumerate(hours):
        # A sample at t covers (t - interval, t]; idle stretches the run jumped over have none.
        shares = [s.busy_share for s in run.samples if (s.t - 1e-9) // spec.hour_s == index]
        hour["busy_share"] = sum(shares) / (spec.hour_s / interval)
    totals = lanes_report(records)
    lifetime = run.engine.lifetime_totals(run.now)
    computed = lifetime.prompt_tokens - lifetime.prefix_cache_hits + lifetime.generation_tokens
    processed = computed - sum(1 for record in run.finished if record.request_id in pieces)
    return {
        "profile": profile_name,
        "cpu_s": cpu_s,
        "hours": hours,
        "online": totals["online"],
        "batch": totals["batch"],
        "busy_share": lifetime.busy_s / spec.duration_s,
        "tokens_processed": processed,
        "capacity_tok_s": capacity_tok_s,
        "work_share": processed / (capacity_tok_s * spec.duration_s),
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


def table(name: str, day: dict[str, Any], gpu_hour_usd: float) -> list[str]:
    """The per-hour table and the totals of one column."""
    lines = [
        f"\n== {day['profile']}: {name} ({day['cpu_s']:.1f} s CPU)",
        "hour  online  slo%    ttft95ms tpot95ms  batch_tok  busy%",
    ]
    for hour in day["hours"]:
        online, batch = hour["online"], hour["batch"]
        slo = online["slo_attainment"]
        lines.append(
            f"{hour['period']:>4} {online['requests']:>7} "
            f"{'-' if slo is None else f'{100 * slo:.2f}':>7} "
            f"{_ms(online['ttft_p95_s']):>8} {_ms(online['tpot_p95_s']):>8} "
            f"{batch['output_tokens']:>10} {100 * hour['busy_share']:>6.1f}"
        )
    cost = cost_per_million(day, gpu_hour_usd)
    lines.append(
        f"day: online SLO {100 * (day['online']['slo_attainment'] or 0):.3f}%, "
        f"TTFT p95 {_ms(day['online']['ttft_p95_s'])} ms, "
        f"TPOT p95 {_ms(day['online']['tpot_p95_s'])} ms, "
        f"batch tokens {day['batch']['output_tokens']:,} "
        f"({day['batch']['aborted']} batch requests cut off), "
        f"busy {100 * day['busy_share']:.1f}%, "
        f"work {100 * day['work_share']:.1f}% of {day['capacity_tok_s']:,.0f} tok/s, "
        + (
            f"${cost:.4f} per M output tokens at ${gpu_hour_usd}/GPU-hour"
            if cost is not None
            else "no tokens"
        )
    )
    return lines


def goals(base: dict[str, Any], cron: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """Issue 18's goals for ``other`` against the no-batch run and the cron window."""
    cron_tokens = int(cron["batch"]["output_tokens"])
    tokens_ratio = int(other["batch"]["output_tokens"]) / cron_tokens if cron_tokens else None
    slo_drop = 100 * (base["online"]["slo_attainment"] - other["online"]["slo_attainment"])
    rises = []
    for before, after in zip(base["hours"], other["hours"], strict=True):
        old, new = before["online"]["ttft_p95_s"], after["online"]["ttft_p95_s"]
        if old and new is not None:
            rises.append((after["period"], new / old - 1))
    worst = max(rises, key=lambda rise: rise[1], default=(None, 0.0))
    over = [hour for hour, rise in rises if rise > GOAL_TTFT_RISE]
    return {
        "batch_tokens_vs_cron": tokens_ratio,
        "slo_points_below_no_batch": slo_drop,
        "worst_ttft_p95_rise": {"hour": worst[0], "rise": worst[1]},
        "hours_ttft_p95_over_10pct": over,
        "met": {
            "tokens": tokens_ratio is not None and tokens_ratio >= GOAL_TOKENS,
            "slo": slo_drop <= GOAL_SLO_POINTS,
            "ttft": not over,
        },
    }


def goal_lines(name: str, result: dict[str, Any]) -> list[str]:
    """The goals of one column, in words."""
    ratio = result["batch_tokens_vs_cron"]
    worst = result["worst_ttft_p95_rise"]
    met = result["met"]
    return [
        f"{name}: batch tokens {ratio:.2f}x the cron window's (goal >= {GOAL_TOKENS:g}x: "
        f"{'met' if met['tokens'] else 'missed'}); online SLO "
        f"{result['slo_points_below_no_batch']:+.3f} points below no batch (goal <= "
        f"{GOAL_SLO_POINTS:g}: {'met' if met['slo'] else 'missed'}); worst hour's TTFT p95 "
        f"{100 * worst['rise']:+.1f}% at {worst['hour']}:00, hours over +10%: "
        f"{result['hours_ttft_p95_over_10pct'] or 'none'} "
        f"({'met' if met['ttft'] else 'missed'})"
    ]


def plot(path: Path, profile_name: str, days: dict[str, dict[str, Any]]) -> None:
    """Online TTFT p95 per hour for every column, and batch tokens per hour."""
    import matplotlib  # noqa: PLC0415 - only the plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    width = 0.4
    bars = [name for name, day in days.items() if day["batch"]["output_tokens"]]
    for name, day in days.items():
        hours = [hour["period"] for hour in day["hours"]]
        ttft = [
            float("nan") if h["online"]["ttft_p95_s"] is None else 1000 * h["online"]["ttft_p95_s"]
            for h in day["hours"]
        ]
        top.plot(hours, ttft, marker="o", markersize=3, label=name)
        if name in bars:
            offset = (bars.index(name) - (len(bars) - 1) / 2) * width
            tokens = [h["batch"]["output_tokens"] / 1e6 for h in day["hours"]]
            bottom.bar([hour + offset for hour in hours], tokens, width=width, label=name)
    top.set_ylabel("online TTFT p95 (ms)")
    top.set_title(f"{profile_name}: a compressed 24-hour day, priority scheduling")
    top.legend()
    top.grid(alpha=0.3)
    bottom.set_ylabel("batch output tokens (M)")
    bottom.set_xlabel("hour of the day")
    bottom.set_xticks(range(24))
    bottom.legend()
    bottom.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def profiled_example(profile_name: str, into: Path) -> tuple[Path, float]:
    """The example window with the profile's prefill cost per token, and that cost (s).

    The example's pace is a model of the instance: it reads the prefill cost per token (the
    8B's 0.00001725 s as shipped), as an operator writes their own server's.
    """
    cost_s = load_profile(profile_name).beta1_us_per_prefill_token * 1e-6
    text = (EXAMPLE_POLICIES / "batch-window.yaml").read_text(encoding="utf-8")
    text, found = re.subn(re.escape(EXAMPLE_PREFILL_COST), f"{cost_s:.8f}", text)
    if not found:
        msg = f"examples/policies/batch-window.yaml has no prefill cost {EXAMPLE_PREFILL_COST}"
        raise SystemExit(msg)
    (into / "batch-window.yaml").write_text(text, encoding="utf-8")
    return into, cost_s


def run_profile(
    profile_name: str,
    spec: DiurnalSpec,
    baselines: dict[str, Window],
    policies: Sequence[Path] | None,
    piece_tokens: int = 0,
) -> dict[str, dict[str, Any]]:
    """Every column of one profile (``policies`` None: the example window, paced)."""
    backlog = batch_jobs(spec)
    capacity = saturated_tok_s(profile_name, backlog)
    days: dict[str, dict[str, Any]] = {}
    for name, window in baselines.items():
        started = time.process_time()
        run = fixed_window_run(spec, profile_name, window, backlog)
        days[name] = summarise(spec, profile_name, run, time.process_time() - started, capacity)
    started = time.process_time()
    with tempfile.TemporaryDirectory(prefix="batch-day-policies-") as scratch:
        cost_s = None
        if policies is None:
            profiled, cost_s = profiled_example(profile_name, Path(scratch))
            policies = [profiled]
        plan = DayPlan(policy_dirs=tuple(policies), piece_tokens=piece_tokens)
        governed = govern_day(spec, profile_name, plan)
    days["governor"] = summarise(
        spec, profile_name, governed.run, time.process_time() - started, capacity, governed.pieces
    )
    days["governor"]["prefill_pieces"] = len(governed.pieces)
    days["governor"]["batch_priorities"] = governed.priorities
    days["governor"]["batch_sent"] = governed.sent
    days["governor"]["lane"] = governed.lane
    days["governor"]["prefill_s_per_token"] = cost_s
    return days


def main() -> None:
    """Run the three columns on each profile and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default=",".join(GPUS))
    parser.add_argument("--cron-hours", default="1-6")
    parser.add_argument("--cron-concurrency", type=int, default=64)
    parser.add_argument("--policies", type=Path, action="append")
    parser.add_argument("--prefill-piece-tokens", type=int, default=0)
    parser.add_argument("--gpu-hour-usd", type=float, default=GPU_HOUR_USD)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--table", type=Path)
    parser.add_argument("--plot", help="PREFIX: one PREFIX-PROFILE.png per profile")
    args = parser.parse_args()
    start, end = (float(part) for part in args.cron_hours.split("-"))
    spec = load_diurnal(WORKLOAD_DIR / "diurnal-24h.yaml")
    cron_name = f"cron {args.cron_hours} h x {args.cron_concurrency}"
    baselines: dict[str, Window] = {
        "no batch": closed,
        cron_name: nightly(
            start_hour=start, end_hour=end, concurrency=args.cron_concurrency, hour_s=spec.hour_s
        ),
    }
    wall = time.monotonic()
    results: dict[str, Any] = {"gpu_hour_usd": args.gpu_hour_usd, "profiles": {}}
    lines: list[str] = []
    for profile_name in args.profiles.split(","):
        days = run_profile(profile_name, spec, baselines, args.policies, args.prefill_piece_tokens)
        profile_lines = [
            line for name, day in days.items() for line in table(name, day, args.gpu_hour_usd)
        ]
        checked = {
            name: goals(days["no batch"], days[cron_name], days[name])
            for name in (cron_name, "governor")
        }
        profile_lines.append(f"\n== {profile_name}: the goals")
        for name, result in checked.items():
            profile_lines.extend(goal_lines(name, result))
        print("\n".join(profile_lines), flush=True)
        lines.extend(profile_lines)
        results["profiles"][profile_name] = {"days": days, "goals": checked}
        if args.plot:
            plot(Path(f"{args.plot}-{profile_name}.png"), profile_name, days)
    lines.append(f"\nwall time {time.monotonic() - wall:.0f} s")
    print(lines[-1])
    if args.table is not None:
        args.table.write_text("\n".join(lines).lstrip() + "\n", encoding="utf-8")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
