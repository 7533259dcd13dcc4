"""The PNG of a demo run: load, latency and SLO attainment over time, KV use, the tuned knob.

Seven panels over the run's time, sharing the x axis, each with one y axis and its unit:

1. the offered load (requests/s);
2. the requests in the server, running and waiting, and, with a gate in front, its cap and
   the requests waiting there;
3. TTFT P95 against its 2 s SLO (a log scale, as a queue reaches tens of seconds, with
   ticks in plain seconds);
4. SLO attainment over time: the share of first tokens within the TTFT SLO per 30 s window
   (from the server's TTFT histogram, :mod:`~daemon.app.demo.first_tokens`), and each server
   process's attainment as the server counted it (of the requests it completed), and per
   act of the workload the share of its arrivals that met the SLO with the governor (this
   run) and without it (the same workload on the starting settings, in virtual time);
5. KV cache use, with preemptions per second only when there were any;
6. the ``max-num-batched-tokens`` being served;
7. the server's log directory as a share of its budget, measured, and without the governor
   (the disk act, :mod:`~daemon.app.demo.log_volume`).

Every panel shades the time the server was down for a restart and marks the proposal and the
answer; the top panel names them (a proposal answered within seconds is one mark) and the
acts. The title states the outcome: SLO attainment before and after the change, in each act
with and without the governor, and the log directory's with and without. matplotlib is
imported here
only, with the Agg backend: no display is needed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from daemon.app.demo.first_tokens import WINDOW_S, share_within
from daemon.app.demo.log_volume import draw_log_panel, log_title
from daemon.app.demo.narration import clock
from daemon.app.demo.sampler import Sample
from daemon.app.demo.scenario import TTFT_SLO_S, TUNED_OPTION
from daemon.app.demo.summary import BEHIND_WARNING_S
from daemon.app.demo.view import offered_load

# TTFT ticks people read without an exponent: seconds.
_TTFT_TICKS = (0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0)
# A proposal answered this close to it (a share of the run) is one mark, not two.
_SAME_MARK = 0.02


def _series(samples: Sequence[Sample], name: str, scale: float = 1.0) -> list[float]:
    nan = float("nan")
    return [nan if (v := s.values.get(name)) is None else v * scale for s in samples]


def draw(
    path: Path,
    samples: Sequence[Sample],
    arrival_times: Sequence[float],
    summary: dict[str, Any],
    proposal_times: Sequence[float],
) -> None:
    """Write the plot of the run to ``path`` (PNG).

    Args:
        path: Where to write it.
        samples: The sampled signals, in time order.
        arrival_times: The workload's arrival times (seconds from its time 0).
        summary: The run's summary (processes, proposals).
        proposal_times: When each proposal was made (seconds from the workload's time 0).
    """
    import matplotlib  # noqa: PLC0415 - lazily: only a demo that draws pays for it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure = figure_of(samples, arrival_times, summary, proposal_times)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def figure_of(
    samples: Sequence[Sample],
    arrival_times: Sequence[float],
    summary: dict[str, Any],
    proposal_times: Sequence[float],
) -> Any:
    """The figure of :func:`draw`, for tests to read its axes."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    times = [s.t for s in samples]
    figure, axes = plt.subplots(7, 1, sharex=True, figsize=(11, 17), constrained_layout=True)
    load, queue, ttft, slo, kv, knob, logs = axes
    end = max([summary.get("duration_s", 0.0), *times, 1.0])

    load.plot(times, [offered_load(arrival_times, t) for t in times], color="tab:blue")
    load.set_ylabel("requests/s")
    load.set_title("offered load: arrivals per second (10 s window)", fontsize=10)
    act_names(load, summary.get("acts", []))

    queue.plot(times, _series(samples, "running"), color="tab:green", label="running")
    queue.plot(times, _series(samples, "waiting"), color="tab:red", label="waiting")
    title = "requests in the server: running and waiting"
    if any(s.values.get("gate_cap") is not None for s in samples):
        gate_cap = _series(samples, "gate_cap")
        queue.step(times, gate_cap, where="post", color="tab:purple", label="the gate's cap")
        queue.plot(
            times, _series(samples, "gate_queue"), color="tab:orange", label="waiting at the gate"
        )
        title += "; at the gate in front: its cap and its queue"
    queue.set_ylabel("requests")
    queue.legend(loc="upper left", fontsize=8)
    queue.set_title(title, fontsize=10)

    _ttft_panel(ttft, times, samples)
    _slo_panel(slo, samples, summary)
    _kv_panel(kv, times, samples)

    nan = float("nan")
    knobs = [nan if s.knob is None else float(s.knob) for s in samples]
    knob.step(times, knobs, where="post", color="tab:brown")
    highest = max((s.knob for s in samples if s.knob is not None), default=64)
    knob.set_ylim(0, highest * 1.3)
    knob.set_ylabel(TUNED_OPTION.replace("max-num-", "max-num-\n"))
    knob.set_title(f"{TUNED_OPTION} of the serving process (gaps: down)", fontsize=10)

    draw_log_panel(logs, samples, summary.get("logs"))
    logs.set_xlabel("time since the workload started (m:ss)")
    _time_ticks(logs, end)

    _mark_events(axes, summary, proposal_times, end)
    logs.set_xlim(0, end)
    figure.suptitle(_title(summary), fontsize=11)
    return figure


def _ttft_panel(axis: Any, times: Sequence[float], samples: Sequence[Sample]) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter  # noqa: PLC0415

    values = _series(samples, "ttft_p95_s")
    axis.plot(times, values, color="tab:purple", label="TTFT P95")
    axis.axhline(TTFT_SLO_S, color="black", linestyle=":", label=f"SLO {TTFT_SLO_S:g} s")
    axis.set_yscale("log")
    known = [v for v in values if not math.isnan(v)]
    low = min([*known, TTFT_SLO_S]) / 1.5
    high = max([*known, TTFT_SLO_S]) * 1.5
    axis.set_ylim(low, high)
    axis.yaxis.set_major_locator(FixedLocator([t for t in _TTFT_TICKS if low <= t <= high]))
    axis.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g} s"))
    axis.yaxis.set_minor_formatter(NullFormatter())
    axis.set_ylabel("seconds (log)")
    axis.legend(loc="upper left", fontsize=8)
    axis.set_title("time to first token, P95 over the governor's 60 s window", fontsize=10)


def _slo_panel(axis: Any, samples: Sequence[Sample], summary: dict[str, Any]) -> None:
    series = [(s.t, s.first_tokens) for s in samples]
    step = WINDOW_S / 3
    ends = [step * index for index in range(1, int((samples[-1].t if samples else 0) / step) + 1)]
    shares = [share_within(series, t - WINDOW_S, t) for t in ends]
    axis.plot(
        ends,
        [float("nan") if share is None else share * 100 for share in shares],
        color="tab:purple",
        marker=".",
        label=f"first tokens within {TTFT_SLO_S:g} s, per {WINDOW_S:.0f} s window",
    )
    for index, process in enumerate(summary.get("processes", [])):
        share = process.get("completed_met_share")
        if process["from_s"] is None or share is None:
            continue
        start = max(0.0, process["from_s"])
        axis.hlines(
            share * 100,
            start,
            process["to_s"],
            color="black",
            linewidth=2.5,
            label="met the SLO, per server process (of the requests it completed)"
            if index == 0
            else None,
        )
        axis.annotate(
            f"{share:.0%}",
            ((start + process["to_s"]) / 2, share * 100),
            textcoords="offset points",
            # Below the line near the top, where the panel's title is.
            xytext=(0, 5 if share < 0.85 else -12),
            ha="center",
            fontsize=9,
        )
    _act_bars(axis, summary.get("acts", []))
    axis.set_ylim(0, 105)
    axis.set_ylabel("% of requests")
    axis.legend(loc="lower left", fontsize=8)
    axis.set_title(
        "SLO attainment over time (TTFT <= 2 s and TPOT <= 100 ms per request)", fontsize=10
    )


def _kv_panel(axis: Any, times: Sequence[float], samples: Sequence[Sample]) -> None:
    axis.plot(times, _series(samples, "kv_usage", 100.0), color="tab:blue", label="KV use")
    axis.set_ylim(0, 105)
    axis.set_ylabel("KV use (%)")
    preemptions = _series(samples, "preemptions_per_s")
    if any(value > 0 for value in preemptions if not math.isnan(value)):
        # A second unit only when there is something to show on it, named on both sides.
        twin = axis.twinx()
        twin.plot(times, preemptions, color="tab:orange", label="preemptions/s (right axis)")
        twin.set_ylim(bottom=0)
        twin.set_ylabel("preemptions/s", color="tab:orange")
        axis.set_ylabel("KV use (%, left axis)", color="tab:blue")
        handles, labels = axis.get_legend_handles_labels()
        more, more_labels = twin.get_legend_handles_labels()
        axis.legend(handles + more, labels + more_labels, loc="upper left", fontsize=8)
        axis.set_title("KV cache use and preemptions", fontsize=10)
    else:
        axis.set_title("KV cache use (no preemptions in this run)", fontsize=10)


def _time_ticks(axis: Any, end: float) -> None:
    from matplotlib.ticker import FuncFormatter, MultipleLocator  # noqa: PLC0415

    axis.xaxis.set_major_locator(MultipleLocator(60 if end > 240 else 30))
    axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: clock(value)))


def _mark_events(
    axes: Any, summary: dict[str, Any], proposal_times: Sequence[float], end: float
) -> None:
    spans = summary.get("processes", [])
    # Down from a process's stop to the next one that served (one stopped while loading
    # never served).
    served = [span for span in spans if span["from_s"] is not None]
    downs = [(a["to_s"], b["from_s"]) for a, b in itertools.pairwise(served)]
    if spans and spans[-1]["from_s"] is None and served:
        downs.append((served[-1]["to_s"], spans[-1]["to_s"]))
    marks = event_marks(summary.get("proposals", []), proposal_times, end)
    # The drain before each stop: the old server finishes what it holds and refuses new
    # requests, part of the restart's cost.
    drains = [
        (cost["at_s"], cost["at_s"] + cost["draining_s"])
        for cost in summary.get("restart_costs", [])
        if cost.get("draining_s")
    ]
    for axis in axes:
        for start, stop in drains:
            axis.axvspan(start, stop, color="grey", alpha=0.12, hatch="//", linewidth=0)
        for start, stop in downs:
            axis.axvspan(start, stop, color="grey", alpha=0.3)
        for at, _text, colour, style in marks:
            axis.axvline(at, color=colour, linestyle=style, linewidth=1.2)
    top = axes[0]
    for index, (at, text, colour, _style) in enumerate(marks):
        top.annotate(
            text,
            (at, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(4, -12 - 12 * index),
            textcoords="offset points",
            color=colour,
            fontsize=8,
        )
    for start, stop in drains:
        top.annotate(
            f"draining {stop - start:.0f} s:\nnew requests refused",
            (start, 0.0),
            xycoords=("data", "axes fraction"),
            xytext=(-4, 4),
            textcoords="offset points",
            ha="right",
            color="dimgrey",
            fontsize=8,
        )
    for start, stop in downs:
        top.annotate(
            f"server down {stop - start:.0f} s\n(loading)",
            (stop, 0.0),
            xycoords=("data", "axes fraction"),
            xytext=(4, 4),
            textcoords="offset points",
            color="dimgrey",
            fontsize=8,
        )


def event_marks(
    proposals: Sequence[dict[str, Any]], proposal_times: Sequence[float], end: float
) -> list[tuple[float, str, str, str]]:
    """Vertical marks ``(t, label, colour, style)``: proposals, and answers apart from them.

    An answer within ``_SAME_MARK`` of the run after its proposal shares its mark, so the
    two do not draw over each other.
    """
    marks: list[tuple[float, str, str, str]] = []
    answered: set[float] = set()
    for proposal in proposals:
        made, at = proposal.get("made_at_s"), proposal["at_s"]
        approved = proposal["answer"] == "approve"
        verb = "approved" if approved else "rejected"
        colour = "tab:green" if approved else "tab:red"
        # The policy that proposed it ("ttft-queue on main: ..."): a run has more than one.
        policy = str(proposal.get("change") or "").partition(" on ")[0]
        who = f"{policy}: " if policy else ""
        if made is not None and at - made <= _SAME_MARK * end:
            marks.append((made, f"{who}proposed and {verb} at {clock(at)}", colour, "--"))
            answered.add(made)
            continue
        marks.append((at, f"{who}{verb} at {clock(at)}", colour, "-"))
    for at in proposal_times:
        if not any(abs(at - made) < 1.0 for made in answered):
            marks.append((at, f"proposed at {clock(at)}", "tab:orange", "--"))
    return sorted(marks)


def _act_bars(axis: Any, acts: Sequence[dict[str, Any]]) -> None:
    """Per act: its arrivals that met the SLO, with the governor and without it."""
    for index, act in enumerate(acts):
        start, end = act["from_s"], act["to_s"]
        if index:
            axis.axvline(start, color="grey", linestyle=":", linewidth=1)
        for key, colour, style, label in (
            ("with_governor", "tab:green", "-", "with the governor, per act (of its arrivals)"),
            ("without_governor", "tab:red", "--", "without it, per act (virtual time)"),
        ):
            share = (act.get(key) or {}).get("slo_attainment")
            if share is None:
                continue
            axis.hlines(
                share * 100, start, end, color=colour, linestyle=style, linewidth=1.5,
                label=label if index == 0 else None,
            )  # fmt: skip


def act_names(axis: Any, acts: Sequence[dict[str, Any]]) -> None:
    """The acts' names along the top panel, each at its start, and a line where it begins."""
    for index, act in enumerate(acts):
        if index:
            axis.axvline(act["from_s"], color="grey", linestyle=":", linewidth=1)
        axis.annotate(
            act["name"], (act["from_s"], 0), xycoords=("data", "axes fraction"),
            xytext=(3, 3), textcoords="offset points", fontsize=8, color="grey",
        )  # fmt: skip


def _title(summary: dict[str, Any]) -> str:
    attainment = summary.get("slo_attainment")
    head = (
        f"vllm-governor demo: {summary.get('workload')} on {summary.get('profile')}, "
        f"approvals {summary.get('approve')}, {summary.get('restarts')} restart(s): "
        f"SLO attainment {_share(attainment)} over the run"
    )
    comparison = summary.get("after_vs_before")
    if comparison is not None:
        head += (
            f"\nafter the change the server met the SLO for {_share(comparison['after'])} "
            f"of the requests it completed, against {_share(comparison['before'])} before"
        )
    acts = summary.get("acts") or []
    behind = summary.get("behind_schedule_s") or 0.0
    if acts and acts[-1].get("without_governor") and behind >= BEHIND_WARNING_S:
        head += (
            f"\n(a busy machine: the server fell {behind:.0f} s behind its model, see the summary)"
        )
    told = [act for act in acts if act.get("without_governor")]
    if told:
        # Whole percents: three acts must fit on one line of the title.
        head += "\nper act, met the SLO with / without the governor: " + ", ".join(
            f"{act['name']} {_whole(act['with_governor']['slo_attainment'])} / "
            f"{_whole(act['without_governor']['slo_attainment'])}"
            for act in told
        )
    gated = [act for act in acts if (act["with_governor"].get("gate") or {}).get("refused")]
    if gated:
        head += "\nthe gate refused with a 503: " + ", ".join(
            f"{act['name']} {act['with_governor']['gate']['refused']}" for act in gated
        )
    disk = log_title(summary.get("logs"))
    return head + (f"\n{disk}" if disk else "")


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _whole(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"
