"""The text of ``whatif``: the workload, the candidates in a table, the pick, the profile check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_COLUMNS = ("SETTING", "SLO MET", "GOODPUT", "TTFT P95", "TPOT P95", "RESTART", "LOST", "OBJECTIVE")


def report_lines(answer: Mapping[str, Any]) -> list[str]:
    """The lines to print for a ``whatif`` answer (its JSON form)."""
    workload = answer["workload"]
    slo = answer["slo"]
    lines = [
        f"what-if for {answer['instance']}: its last {workload['window_s']:g} s"
        f" ({workload['scrapes']} scrapes), profile {answer['profile']},"
        f" SLO TTFT <= {_seconds(slo['ttft_s'])} and TPOT <= {_seconds(slo['tpot_s'])}",
        f"workload: {workload['rate_rps']:g} req/s, arrival CV {workload['arrival_cv']:g}"
        f" (arrivals per scrape: CV {workload['count_cv']:g})",
        *_demand(workload.get("demand"), answer.get("gate")),
        _lengths("prompt tokens", workload["prompt_tokens"]),
        _lengths("output tokens", workload["output_tokens"]),
        "",
        f"each candidate replays {answer['simulated_s']:g} s of that workload; a restart's"
        f" downtime is paid over {answer['horizon_s']:g} s",
    ]
    rows = [_COLUMNS, *(_row(candidate, answer["pick"]) for candidate in answer["candidates"])]
    widths = [max(len(row[index]) for row in rows) for index in range(len(_COLUMNS))]
    lines.extend(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
    current = answer["current"]
    lines += [
        "",
        f"in force: {current['max_num_seqs']}x{current['max_num_batched_tokens']},"
        f" SLO met by {current['slo_attainment']:.1%}, goodput {current['goodput_rps']:.2f} req/s",
        f"pick: {answer['reason']}",
        f"profile check: {answer['profile_check']['verdict']}: {answer['profile_check']['reason']}",
    ]
    lines += [f"note: {note}" for note in answer["notes"]]
    lines.append(f"cost: {answer['cpu_s']:.2f} CPU s")
    return lines


def _demand(demand: Mapping[str, Any] | None, gate: Mapping[str, Any] | None) -> list[str]:
    """Behind a gate: the demand's split, and the gate the replays go through."""
    if demand is None:
        return []
    line = (
        f"  at the gate: {demand['admitted_rps']:g} req/s admitted, {demand['refused_rps']:g}"
        f" refused, {demand['queued_rps']:g} into its queue (cap {demand['gate_cap']})"
    )
    if gate is not None:
        line += f"; replayed behind it, {gate['queue_timeout_s']:g} s queue timeout"
    return [line]


def _lengths(what: str, lengths: Mapping[str, Any]) -> str:
    fit = lengths["fit"]
    return (
        f"  {what}: p50 {lengths['p50']:g}, p90 {lengths['p90']:g}, p99 {lengths['p99']:g},"
        f" mean {lengths['mean']:g} (log-normal fit: median {fit['median']:g}, p90 {fit['p90']:g})"
    )


def _row(candidate: Mapping[str, Any], pick: Mapping[str, Any] | None) -> tuple[str, ...]:
    setting = f"{candidate['max_num_seqs']}x{candidate['max_num_batched_tokens']}"
    chosen = pick is not None and all(candidate[key] == value for key, value in pick.items())
    mark = "*" if chosen else ("=" if candidate["current"] else " ")
    return (
        f"{mark} {setting}",
        f"{candidate['slo_attainment']:.1%}",
        f"{candidate['goodput_rps']:.2f}/s",
        _seconds(candidate["ttft_p95_s"]),
        _seconds(candidate["tpot_p95_s"]),
        "in force" if candidate["current"] else f"{candidate['restart_downtime_s']:.0f} s",
        f"{candidate['requests_lost_to_restart']:.0f}",
        f"{candidate['objective_goodput_rps']:.2f}/s",
    )


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
