"""The PNG of a demo run: load, latency against the SLO, KV use, the tuned knob, the events.

Four panels over the run's time, sharing the x axis: the offered load with the running and
waiting requests; TTFT P95 against its 2 s SLO (log scale: a queue reaches tens of
seconds); KV cache use and preemptions per second; the ``max-num-batched-tokens`` being
served. Every panel marks when a proposal was made (dashed orange), when it was answered
(green approve, red reject) and shades the time the server was down for a restart.
matplotlib is imported here only, with the Agg backend: no display is needed.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from daemon.app.demo.sampler import Sample
from daemon.app.demo.scenario import TTFT_SLO_S, TUNED_OPTION
from daemon.app.demo.view import offered_load


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

    times = [s.t for s in samples]
    figure, axes = plt.subplots(4, 1, sharex=True, figsize=(11, 10), constrained_layout=True)
    load_axis, ttft_axis, kv_axis, knob_axis = axes
    end = max([summary.get("duration_s", 0.0), *times, 1.0])

    load_axis.plot(times, [offered_load(arrival_times, t) for t in times], label="offered (req/s)")
    load_axis.set_ylabel("requests/s")
    queue_axis = load_axis.twinx()
    queue_axis.plot(times, _series(samples, "running"), color="tab:green", label="running")
    queue_axis.plot(times, _series(samples, "waiting"), color="tab:red", label="waiting")
    queue_axis.set_ylabel("requests")
    handles = load_axis.get_legend_handles_labels()
    more = queue_axis.get_legend_handles_labels()
    load_axis.legend(handles[0] + more[0], handles[1] + more[1], loc="upper left", fontsize=8)
    load_axis.set_title("load: offered arrivals, running and waiting requests", fontsize=10)

    ttft_axis.plot(times, _series(samples, "ttft_p95_s"), color="tab:purple", label="TTFT p95")
    ttft_axis.axhline(TTFT_SLO_S, color="black", linestyle=":", label=f"SLO {TTFT_SLO_S:g} s")
    ttft_axis.set_yscale("log")
    ttft_axis.set_ylabel("seconds")
    ttft_axis.legend(loc="upper left", fontsize=8)
    ttft_axis.set_title("time to first token, P95 over the governor's window", fontsize=10)

    kv_axis.plot(times, _series(samples, "kv_usage", 100.0), color="tab:blue", label="KV use (%)")
    kv_axis.set_ylim(0, 105)
    kv_axis.set_ylabel("KV use (%)")
    preempt_axis = kv_axis.twinx()
    preempt_axis.plot(
        times, _series(samples, "preemptions_per_s"), color="tab:orange", label="preemptions/s"
    )
    preempt_axis.set_ylabel("preemptions/s")
    handles = kv_axis.get_legend_handles_labels()
    more = preempt_axis.get_legend_handles_labels()
    kv_axis.legend(handles[0] + more[0], handles[1] + more[1], loc="upper left", fontsize=8)
    kv_axis.set_title("KV cache use and preemptions", fontsize=10)

    nan = float("nan")
    knob = [nan if s.knob is None else float(s.knob) for s in samples]
    knob_axis.step(times, knob, where="post", color="tab:brown", label=f"{TUNED_OPTION} served")
    highest = max((s.knob for s in samples if s.knob is not None), default=64)
    knob_axis.set_ylim(0, highest * 1.3)
    knob_axis.set_ylabel(TUNED_OPTION)
    knob_axis.set_xlabel("seconds since the workload started")
    knob_axis.set_title(f"{TUNED_OPTION} of the serving process (gaps: down)", fontsize=10)

    _mark_events(axes, summary, proposal_times)
    knob_axis.legend(loc="upper left", fontsize=8)
    knob_axis.set_xlim(0, end)
    figure.suptitle(_title(summary), fontsize=11)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _mark_events(axes: Any, summary: dict[str, Any], proposal_times: Sequence[float]) -> None:
    spans = summary.get("processes", [])
    # Down from a process's stop to the next one that served (one stopped while loading
    # never served).
    served = [span for span in spans if span["from_s"] is not None]
    downs = [(a["to_s"], b["from_s"]) for a, b in itertools.pairwise(served)]
    if spans and spans[-1]["from_s"] is None and served:
        downs.append((served[-1]["to_s"], spans[-1]["to_s"]))
    for axis in axes:
        for index, (start, stop) in enumerate(downs):
            label = "server down (restart)" if index == 0 else None
            axis.axvspan(start, stop, color="grey", alpha=0.3, label=label)
        for index, at in enumerate(proposal_times):
            label = "proposal" if index == 0 else None
            axis.axvline(at, color="tab:orange", linestyle="--", label=label)
        for index, proposal in enumerate(summary.get("proposals", [])):
            approved = proposal["answer"] == "approve"
            label = ("approved" if approved else "rejected") if index == 0 else None
            colour = "tab:green" if approved else "tab:red"
            axis.axvline(proposal["at_s"], color=colour, linestyle="-", label=label)


def _title(summary: dict[str, Any]) -> str:
    attainment = summary.get("slo_attainment")
    share = "-" if attainment is None else f"{attainment:.1%}"
    return (
        f"vllm-governor demo: {summary.get('workload')} on {summary.get('profile')}, "
        f"approvals {summary.get('approve')}: SLO attainment {share}, "
        f"{summary.get('restarts')} restart(s)"
    )
