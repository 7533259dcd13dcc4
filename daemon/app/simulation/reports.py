"""The simulate report: every controller's metrics (mean, per seed, per phase), a table, a plot.

``best-static`` is the grid point with the best mean goodput over the whole run, chosen in
hindsight; ``best-static-per-phase`` is, for each phase, the grid point with the best mean
goodput in that phase, combined (an oracle no static setting can reach: it would need a
restart at every phase boundary, which it is not charged for).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from daemon.app.simulation.metrics import METRICS, mean_of, phase_metrics, run_metrics
from daemon.app.simulation.names import BEST_STATIC, PER_PHASE, STATIC_DEFAULT
from daemon.app.simulation.runs import STATIC_PREFIX
from daemon.app.simulation.tallies import RunTally
from daemon.app.simulation.workloads import Stretch


def controller_entry(results: Sequence[RunTally], bursts: Sequence[Stretch]) -> dict[str, Any]:
    """One controller's metrics: the mean over seeds, then per phase and per seed."""
    per_seed = [run_metrics(r, bursts) | {"seed": r.seed} for r in results]
    entry = {key: mean_of([{key: row[key]} for row in per_seed])[key] for key in METRICS}
    phases: dict[str, Any] = {}
    for index, phase in enumerate(results[0].phases):
        rows = [phase_metrics([r.phases[index]], r.events) for r in results]
        phases[phase.name] = mean_of(rows) | {"start_s": phase.start_s, "end_s": phase.end_s}
    entry["phases"] = phases
    entry["per_seed"] = per_seed
    entry["settings"] = results[0].settings
    return entry


def build(
    by_controller: Mapping[str, Sequence[RunTally]],
    *,
    profile: str,
    workload: str,
    seeds: Sequence[int],
    phases: Sequence[Stretch],
    bursts: Sequence[Stretch],
    wanted: Sequence[str],
) -> dict[str, Any]:
    """The JSON report of every wanted controller (grid points stay out of it)."""
    controllers: dict[str, Any] = {}
    grid = {name: rs for name, rs in by_controller.items() if name.startswith(STATIC_PREFIX)}
    for name in wanted:
        if name in by_controller:
            controllers[name] = controller_entry(by_controller[name], bursts)
        elif name == BEST_STATIC and grid:
            best = max(grid, key=lambda g: _mean_goodput(grid[g]))
            controllers[name] = controller_entry(grid[best], bursts) | {"grid_point": best}
        elif name == PER_PHASE and grid:
            controllers[name] = _per_phase(grid, bursts)
    return {
        "controllers": controllers,
        "profile": profile,
        "workload": workload,
        "seeds": list(seeds),
        "phases": [{"name": p.name, "start_s": p.start_s, "end_s": p.end_s} for p in phases],
        "bursts": [
            {"start_s": b.start_s, "end_s": b.end_s, "multiplier": b.multiplier} for b in bursts
        ],
        "grid": {name: _mean_goodput(rs) for name, rs in grid.items()},
    }


def _mean_goodput(results: Sequence[RunTally]) -> float:
    return statistics.fmean(phase_metrics(r.phases, [])["goodput_rps"] for r in results)


def _per_phase(grid: Mapping[str, Sequence[RunTally]], bursts: Sequence[Stretch]) -> Any:
    """The oracle: per phase the best grid point, phases combined seed by seed."""
    names = list(grid)
    first = grid[names[0]]
    count = len(first[0].phases)
    chosen = [
        max(
            names,
            key=lambda g, i=i: statistics.fmean(  # type: ignore[misc]
                phase_metrics([r.phases[i]], [])["goodput_rps"] for r in grid[g]
            ),
        )
        for i in range(count)
    ]
    combined: list[RunTally] = []
    for seed_index, base in enumerate(first):
        phases = [grid[chosen[i]][seed_index].phases[i] for i in range(count)]
        combined.append(
            RunTally(
                controller=PER_PHASE,
                seed=base.seed,
                duration_s=base.duration_s,
                phases=phases,
                restarts=0,
                downtime_s=0.0,
                preemptions=sum(p.preemptions for p in phases),
                events=[],
                buckets=base.buckets,
                series=[],
            )
        )
    entry = controller_entry(combined, bursts)
    entry["time_to_react_s"] = entry["time_to_recover_s"] = None
    for seed_row in entry["per_seed"]:
        seed_row["time_to_react_s"] = seed_row["time_to_recover_s"] = None
    entry["grid_points"] = dict(zip([p.name for p in first[0].phases], chosen, strict=True))
    return entry


def table(report: Mapping[str, Any]) -> str:
    """Controllers side by side, with goodput and attainment ratios against static-default."""
    controllers = report["controllers"]
    base = controllers.get(STATIC_DEFAULT, {})
    header = (
        f"{'controller':<24}{'SLO':>7}{'goodput/s':>11}{'x static':>9}{'tok/s':>9}"
        f"{'TTFT p95':>10}{'restarts':>9}{'actions':>8}{'react s':>8}{'recover s':>10}"
        f"{'revs':>5}"
    )
    lines = [
        f"profile {report['profile']}, workload {report['workload']}, seeds {report['seeds']}",
        header,
    ]
    for name, entry in controllers.items():
        ratio = _ratio(entry["goodput_rps"], base.get("goodput_rps"))
        lines.append(
            f"{name:<24}{_pct(entry['slo_attainment']):>7}{entry['goodput_rps']:>11.2f}"
            f"{ratio:>9}{entry['goodput_tok_s']:>9.0f}{_num(entry['ttft_p95_s']):>10}"
            f"{entry['restarts']:>9.1f}{entry['actions']:>8.1f}"
            f"{_num(entry['time_to_react_s']):>8}{_num(entry['time_to_recover_s']):>10}"
            f"{entry['reversals']:>5.1f}"
        )
    return "\n".join(lines)


def _ratio(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "-"
    return f"{value / base:.2f}x"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def plot(
    report: Mapping[str, Any], by_controller: Mapping[str, Sequence[RunTally]], path: Path
) -> None:
    """A PNG: attainment over time and max-num-seqs / gate cap, first seed, phases shaded.

    matplotlib (Agg) is imported here only, so a daemon never loads it.
    """
    import matplotlib  # noqa: PLC0415 - lazily: the daemon's idle memory must not grow

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(12, 7), sharex=True)
    for name in report["controllers"]:
        results = by_controller.get(name) or by_controller.get(
            report["controllers"][name].get("grid_point", "")
        )
        if not results:
            continue
        first = results[0]
        per = 12  # 60 s windows of 5 s buckets
        xs, ys = [], []
        for end in range(per, len(first.buckets) + 1, 2):
            window = first.buckets[end - per : end]
            total = sum(n for n, _ in window)
            if total:
                xs.append(end * 5 / 60)
                ys.append(sum(g for _, g in window) / total)
        top.plot(xs, ys, label=name, linewidth=1)
        if first.series:
            times = [s[0] / 60 for s in first.series]
            caps = [s[2] if s[2] is not None else s[1] for s in first.series]
            bottom.plot(times, caps, label=name, linewidth=1)
    for phase in report["phases"]:
        for axis in (top, bottom):
            axis.axvline(phase["start_s"] / 60, color="grey", linewidth=0.5)
        top.text(phase["start_s"] / 60, 1.01, phase["name"], fontsize=8)
    top.set_ylabel("SLO attainment (60 s)")
    top.set_ylim(0, 1.05)
    bottom.set_ylabel("gate cap / max-num-seqs")
    bottom.set_yscale("log")
    bottom.set_xlabel("minutes")
    top.legend(fontsize=7, ncol=3, loc="lower left")
    figure.suptitle(f"{report['workload']} on {report['profile']}, seed {report['seeds'][0]}")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
