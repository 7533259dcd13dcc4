"""The demo's plot read back from its matplotlib figure (issue 19, finding 10)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import matplotlib
import pytest

from daemon.app.demo.first_tokens import FirstTokens
from daemon.app.demo.plot import event_marks, figure_of
from daemon.app.demo.sampler import Sample

matplotlib.use("Agg")
import matplotlib.pyplot as plt

SUMMARY: dict[str, Any] = {
    "duration_s": 420.0, "workload": "w", "profile": "p", "approve": "terminal", "restarts": 1,
    "slo_attainment": 0.74,
    "after_vs_before": {"before": 0.70, "after": 0.85, "before_settings": {},
                        "after_settings": {}},
    "processes": [
        {"from_s": -5.0, "to_s": 230.0, "completed_met_share": 0.70},
        {"from_s": 243.0, "to_s": 425.0, "completed_met_share": 0.85},
    ],
    "proposals": [{"made_at_s": 216.0, "at_s": 216.4, "answer": "approve"}],
}  # fmt: skip


def samples(preemptions: float = 0.0) -> list[Sample]:
    out = []
    for index in range(840):
        t = index / 2
        knob = None if 230 < t < 243 else (256 if t <= 230 else 320)
        process = "a" if t <= 230 else "b"
        served = t if t <= 230 else t - 243
        counts = None if knob is None else FirstTokens(process, served * 12, served * 9)
        values: dict[str, float | None] = {"running": 30.0, "waiting": 40.0, "kv_usage": 0.3,
                  "ttft_p95_s": 4.4 if t < 240 else 1.6, "tpot_p95_s": 0.012,
                  "preemptions_per_s": preemptions}  # fmt: skip
        out.append(Sample(t, "ready", values, knob, counts))
    return out


@pytest.fixture
def figure() -> Iterator[Any]:
    figure = figure_of(samples(), [i / 13 for i in range(420 * 13)], SUMMARY, [216.0])
    figure.canvas.draw()
    yield figure
    plt.close(figure)


def titled(figure: Any, words: str) -> Any:
    [axis] = [axis for axis in figure.axes if words in axis.get_title()]
    return axis


def test_every_panel_has_one_y_axis_and_no_preemptions_axis_around_a_flat_zero(
    figure: Any,
) -> None:
    assert len(figure.axes) == 7  # no twin axes
    kv = titled(figure, "KV cache use")
    assert "no preemptions" in kv.get_title()
    assert kv.get_ylim() == (0, 105)


def test_a_second_axis_appears_only_with_preemptions_and_says_which_line_is_on_it() -> None:
    figure = figure_of(samples(preemptions=0.5), [], SUMMARY, [216.0])
    try:
        assert len(figure.axes) == 8
        twin = figure.axes[-1]
        assert twin.get_ylim()[0] == 0
        assert twin.get_legend_handles_labels()[1] == ["preemptions/s (right axis)"]
    finally:
        plt.close(figure)


def test_ttft_ticks_are_plain_seconds(figure: Any) -> None:
    ttft = titled(figure, "time to first token")
    assert ttft.get_yscale() == "log"
    labels = [tick.get_text() for tick in ttft.get_yticklabels() if tick.get_text()]
    assert labels == ["2 s", "3 s", "5 s"]
    # Before: 2x10^0, 3x10^0 on the minor ticks, 10^0 and 10^1 on the major ones.
    assert not [tick.get_text() for tick in ttft.get_yticklabels(minor=True) if tick.get_text()]


def test_an_attainment_over_time_panel_shows_the_windows_and_each_process(figure: Any) -> None:
    slo = titled(figure, "SLO attainment over time")
    assert slo.get_ylim() == (0, 105)
    assert slo.get_ylabel() == "% of requests"
    [windows] = [line for line in slo.get_lines() if "first tokens" in line.get_label()]
    shares = [share for share in windows.get_ydata() if not math.isnan(share)]
    assert len(shares) > 30
    assert shares == [pytest.approx(75.0)] * len(shares)
    texts = [text.get_text() for text in slo.texts]
    assert texts == ["70%", "85%"]
    assert "85.0%" in figure._suptitle.get_text()
    assert "70.0%" in figure._suptitle.get_text()


def test_a_proposal_answered_at_once_is_one_mark() -> None:
    marks = event_marks(SUMMARY["proposals"], [216.0], end=420.0)
    assert [(at, text) for at, text, _, _ in marks] == [(216.0, "proposed and approved at 3:36")]
    later = [{"made_at_s": 216.0, "at_s": 290.0, "answer": "reject"}]
    assert [text for _, text, _, _ in event_marks(later, [216.0], end=420.0)] == [
        "proposed at 3:36",
        "rejected at 4:50",
    ]
    # Each names the policy that proposed it.
    named = [{**later[0], "change": "log-disk on main: log_level 20 -> 30"}]
    assert [text for _, text, _, _ in event_marks(named, [216.0], end=420.0)][1] == (
        "log-disk: rejected at 4:50"
    )


def test_time_reads_as_minutes_and_seconds(figure: Any) -> None:
    bottom = figure.axes[6]
    low, high = bottom.get_xlim()
    shown = [
        label.get_text()
        for tick, label in zip(bottom.get_xticks(), bottom.get_xticklabels(), strict=True)
        if low <= tick <= high
    ]
    assert shown == ["0:00", "1:00", "2:00", "3:00", "4:00", "5:00", "6:00", "7:00"]


def test_the_log_panel_sets_the_directory_beside_the_run_without_the_governor() -> None:
    acts = [
        {"name": name, "from_s": start, "to_s": end,
         "with_governor": {"slo_attainment": with_}, "without_governor": {"slo_attainment": w}}
        for name, start, end, with_, w in (
            ("before the shift", 0, 30, 0.98, 1.0), ("after the shift", 30, 300, 0.75, 0.7),
            ("disk pressure", 300, 420, 0.79, 0.64),
        )
    ]  # fmt: skip
    logs = {
        "budget_bytes": 1000, "older_bytes": 400, "end_s": 420.0,
        "with_governor": {"end_bytes": 870, "end_share": 0.87, "peak_share": 0.87},
        "without_governor": {"end_bytes": 1200, "end_share": 1.2, "full_at_s": 300.0,
                             "curve": [[0, 400], [210, 800], [420, 1200]]},
    }  # fmt: skip
    with_logs = [
        Sample(s.t, s.state, s.values, s.knob, s.first_tokens, 400 + min(470, int(s.t * 2)))
        for s in samples()
    ]
    figure = figure_of(with_logs, [], {**SUMMARY, "logs": logs, "acts": acts}, [216.0])
    try:
        panel = titled(figure, "log directory against its budget")
        lines = {line.get_label(): line for line in panel.get_lines()}
        measured = lines["with the governor (measured)"].get_ydata()
        assert measured[0] == pytest.approx(40.0)
        assert max(measured) == pytest.approx(87.0)
        without = lines["without it (the workload's request lines)"]
        assert list(without.get_ydata()) == [40.0, 80.0, 120.0]
        assert without.get_linestyle() == "--"
        # The budget and log-disk's threshold are drawn.
        assert {100.0, 85.0} <= {line.get_ydata()[0] for line in panel.get_lines()}
        title = figure._suptitle.get_text()
        assert (
            "disk: the log directory ended at 87% of its budget with the governor; "
            "without it 120%, over its budget from 5:00" in title
        )
        # Every act with and without the governor, not only the last.
        assert (
            "with / without the governor: before the shift 98% / 100%, after the "
            "shift 75% / 70%, disk pressure 79% / 64%" in title
        )
    finally:
        plt.close(figure)


def test_the_queue_panel_shows_the_gate_s_cap_and_the_title_its_refusals() -> None:
    gated = [
        Sample(
            s.t, s.state,
            {**s.values, "gate_cap": 64.0 if s.t < 30 else 32.0,
             "gate_queue": 12.0 if 10 <= s.t < 16 else 0.0},
            s.knob, s.first_tokens,
        )
        for s in samples()
    ]  # fmt: skip
    acts = [
        {"name": "a burst", "from_s": 0, "to_s": 30, "without_governor": {"slo_attainment": 0.35},
         "with_governor": {"slo_attainment": 0.53, "gate": {"waited": 87, "refused": 69}}},
        {"name": "after the shift", "from_s": 30, "to_s": 420,
         "without_governor": {"slo_attainment": 0.6},
         "with_governor": {"slo_attainment": 0.9, "gate": {"waited": 0, "refused": 0}}},
    ]  # fmt: skip
    figure = figure_of(gated, [], {**SUMMARY, "acts": acts}, [216.0])
    try:
        panel = titled(figure, "at the gate in front: its cap and its queue")
        lines = {line.get_label(): line for line in panel.get_lines()}
        assert set(lines["the gate's cap"].get_ydata()) == {64.0, 32.0}
        assert max(lines["waiting at the gate"].get_ydata()) == 12.0
        # Only the acts in which the gate refused anybody are named.
        assert "\nthe gate refused with a 503: a burst 69\n" in figure._suptitle.get_text() + "\n"
    finally:
        plt.close(figure)
    plain = figure_of(samples(), [], SUMMARY, [216.0])
    try:
        assert titled(plain, "requests in the server").get_title() == (
            "requests in the server: running and waiting"
        )
    finally:
        plt.close(plain)
