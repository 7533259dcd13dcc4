"""The disk act: a log directory near its budget, and quieter logs, with the governor and without.

The demo's simulated vLLM writes its output into a log directory of its own
(:attr:`~daemon.app.demo.scenario.Paths.log_dir`), as a vLLM unit's output lands on a log
volume, and the governor's host source reads that directory against a byte budget
(``[sources.host] dir_budgets``): ``host_disk_usage_ratio`` of the directory is the size of
its files over the budget, as a directory quota makes ``df`` show it. The server starts at
INFO with ``enable-log-requests``, so it writes vLLM's line for every request it takes
(:mod:`simulator.server.request_log`: about seven bytes per prompt token).

The stage: the directory already holds older, rotated logs, and its budget is sized so that,
left alone, the server's request lines take it past the pack's ``log-disk`` threshold (85%) at
:data:`THRESHOLD_AT_SHARE` of the run and past the budget at :data:`FULL_AT_SHARE`: the third
act, once the tuned change of the second has been made, verified and measured (a restart
while another change is verified would be judged against a workload that had just shifted).
With the governor the server is down for a while in the second act and logs nothing then, so
the threshold comes a little later than without it; ``log-disk`` then proposes WARNING and no
request lines (a restart, approved as any), and the directory stops growing.

*Without the governor* is the same server on the starting settings, never restarted: it
writes the line of every arrival of the workload, so the directory's size at any time is the
older logs plus the lines of the arrivals due by then (:func:`growth_without`), computed from
the workload itself, exactly, without a run. *With* is measured: the directory's size as the
demo found it, sampled through the run and once after the server stopped.
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.app.demo.narration import clock
from simulator.arrivals import Arrival
from simulator.server.request_log import request_log_bytes

THRESHOLD_AT_SHARE = 0.64
"""When, as a share of the run, the directory passes 85% of its budget without the governor."""
FULL_AT_SHARE = 0.83
"""When, as a share of the run, it passes its budget without the governor."""
OLDER_LOGS = "vllm.log.1"
"""The rotated log the directory holds at the start."""
THRESHOLD = 0.85
"""The pack's ``log-disk`` threshold (its ``when``), drawn on the plot."""
CURVE_STEP_S = 2
"""Seconds between two points of the curve without the governor."""


@dataclass(frozen=True, slots=True)
class LogVolume:
    """The log directory's budget and what it holds at the start.

    Attributes:
        budget_bytes: The budget (``dir_budgets``).
        older_bytes: The older logs written before the run.
    """

    budget_bytes: int
    older_bytes: int


def growth_without(arrivals: Sequence[Arrival]) -> list[tuple[float, int]]:
    """``(t, bytes)``: the request lines written by ``t`` on the starting settings, cumulated.

    The server, never restarted, takes every arrival and writes its line (the ids it would
    give them, ``load-1``, ``load-2``..., for the lines' lengths).
    """
    sizes = (
        request_log_bytes(f"load-{index}", arrival.prompt_tokens, arrival.output_tokens)
        for index, arrival in enumerate(arrivals, start=1)
    )
    return list(zip((a.arrived_at for a in arrivals), itertools.accumulate(sizes), strict=True))


def bytes_by(growth: Sequence[tuple[float, int]], t: float) -> int:
    """What ``growth`` had written by ``t``."""
    index = bisect.bisect_right([at for at, _ in growth], t)
    return growth[index - 1][1] if index else 0


def plan_volume(arrivals: Sequence[Arrival], duration_s: float) -> LogVolume:
    """A budget and older logs that the server's lines take past 85% and 100% on time.

    Without the governor: past :data:`THRESHOLD` at ``THRESHOLD_AT_SHARE`` of the run, past
    the budget at ``FULL_AT_SHARE``.
    """
    growth = growth_without(arrivals)
    at_threshold = bytes_by(growth, THRESHOLD_AT_SHARE * duration_s)
    at_full = bytes_by(growth, FULL_AT_SHARE * duration_s)
    budget = max(1, round((at_full - at_threshold) / (1.0 - THRESHOLD)))
    return LogVolume(budget_bytes=budget, older_bytes=max(0, budget - at_full))


def write_older_logs(log_dir: Path, volume: LogVolume) -> None:
    """Create ``log_dir`` holding the older logs (sparse-free: real bytes, as a log is)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    line = b"INFO older log line, rotated before the demo started\n"
    block = line * (65536 // len(line))
    left = volume.older_bytes
    with (log_dir / OLDER_LOGS).open("wb") as older:
        while left > 0:
            chunk = block[:left]
            older.write(chunk)
            left -= len(chunk)


def directory_bytes(log_dir: Path) -> int | None:
    """The size of the files directly in ``log_dir`` (the demo writes no subdirectory)."""
    try:
        with os.scandir(log_dir) as entries:
            return sum(e.stat().st_size for e in entries if e.is_file(follow_symlinks=False))
    except OSError:
        return None


def log_act(
    volume: LogVolume,
    arrivals: Sequence[Arrival],
    measured: Sequence[tuple[float, int]],
    end_s: float,
) -> dict[str, Any]:
    """The act with the governor (``measured``: ``(t, bytes)`` in time order) and without it."""
    growth = growth_without(arrivals)
    budget = volume.budget_bytes
    without_end = volume.older_bytes + bytes_by(growth, end_s)
    full = next((t for t, b in growth if volume.older_bytes + b >= budget), None)
    with_end = measured[-1][1] if measured else None
    return {
        "budget_bytes": budget,
        "older_bytes": volume.older_bytes,
        "end_s": round(end_s, 3),
        "with_governor": {
            "end_bytes": with_end,
            "end_share": None if with_end is None else with_end / budget,
            "peak_share": max((b for _, b in measured), default=0) / budget if measured else None,
        },
        "without_governor": {
            "end_bytes": without_end,
            "end_share": without_end / budget,
            "full_at_s": None if full is None or full > end_s else round(full, 3),
            # For the plot: every CURVE_STEP_S, from the start to the end.
            "curve": [
                [t, volume.older_bytes + bytes_by(growth, t)]
                for t in range(0, math.ceil(end_s) + 1, CURVE_STEP_S)
            ],
        },
    }


def log_lines(act: dict[str, Any] | None) -> list[str]:
    """The disk act in words: the directory at the end with the governor, and without it."""
    if not act:
        return []
    budget = act["budget_bytes"]
    with_, without = act["with_governor"], act["without_governor"]
    full = without["full_at_s"]
    with_text = (
        "-"
        if with_["end_bytes"] is None
        else f"{_mb(with_['end_bytes'])} ({_pct(with_['end_share'])} of it)"
    )
    return [
        f"disk pressure: the log directory's budget is {_mb(budget)}, "
        f"{_pct(act['older_bytes'] / budget)} of it older logs at the start; at the end it "
        f"held {with_text} with the governor, and would hold {_mb(without['end_bytes'])} "
        f"({_pct(without['end_share'])}) without it"
        + ("" if full is None else f", over its budget from {clock(full)}")
        + " (the same server at INFO with request logging, never restarted)"
    ]


def _mb(size: float) -> str:
    return f"{size / 1e6:.1f} MB"


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"


def log_title(act: dict[str, Any] | None) -> str:
    """The disk act in one line for the plot's title; empty without it."""
    if not act or act["with_governor"]["end_share"] is None:
        return ""
    without = act["without_governor"]
    full = without["full_at_s"]
    return (
        f"disk: the log directory ended at {_pct(act['with_governor']['end_share'])} of its "
        f"budget with the governor; without it {_pct(without['end_share'])}"
        + ("" if full is None else f", over its budget from {clock(full)}")
    )


def draw_log_panel(axis: Any, samples: Sequence[Any], act: dict[str, Any] | None) -> None:
    """The log directory as a share of its budget: measured, and without the governor, dashed."""
    axis.set_ylabel("% of budget")
    axis.set_title(
        "log directory against its budget: with the governor, and (dashed) the same server "
        "left at INFO with request logging",
        fontsize=10,
    )
    if not act:
        return
    budget = act["budget_bytes"]
    measured = [(s.t, s.log_bytes) for s in samples if s.log_bytes is not None]
    axis.plot(
        [t for t, _ in measured], [100 * b / budget for _, b in measured],
        color="tab:green", label="with the governor (measured)",
    )  # fmt: skip
    curve = act["without_governor"]["curve"]
    axis.plot(
        [t for t, _ in curve], [100 * b / budget for _, b in curve],
        color="tab:red", linestyle="--", label="without it (the workload's request lines)",
    )  # fmt: skip
    axis.axhline(100, color="black", linewidth=0.8)
    axis.axhline(100 * THRESHOLD, color="tab:orange", linestyle=":", linewidth=1)
    axis.annotate(
        "log-disk's threshold", (0, 100 * THRESHOLD), xycoords=("axes fraction", "data"),
        xytext=(3, 2), textcoords="offset points", fontsize=8, color="tab:orange",
    )  # fmt: skip
    low = 100 * act["older_bytes"] / budget
    top = max([100 * act["without_governor"]["end_share"], 100.0])
    axis.set_ylim(low - 2, top + 2)
    axis.legend(loc="upper left", fontsize=8)
