"""The demo's summary arithmetic: counts from the server's own lines, nothing estimated."""

from __future__ import annotations

from typing import Any

import pytest

from daemon.app.demo.approver import Answer
from daemon.app.demo.summary import render, request_counts, slo_attainment, summarise

ORIGIN = 1000.0


def line(
    *,
    ready_at: float | None,
    stopped_at: float,
    seqs: int = 48,
    completed: int = 0,
    aborted: int = 0,
    rejected: int = 0,
    met: int = 0,
    first: int = 0,
    next_: int = 0,
    tokens: int = 0,
    good_tokens: int = 0,
    preemptions: int = 0,
) -> dict[str, Any]:
    load = None
    if ready_at is not None:
        load = {"name": "w", "total": 500, "first": first, "next": next_, "submitted": 0}
    return {
        "ready_at": ready_at,
        "stopped_at": stopped_at,
        "settings": {"max_num_seqs": seqs, "max_num_batched_tokens": 8192, "num_gpu_blocks": 6000},
        "requests": {"completed": completed, "aborted": aborted, "rejected": rejected},
        "met_slo": met,
        "output_tokens": tokens,
        "good_output_tokens": good_tokens,
        "preemptions": preemptions,
        "load": load,
    }


# A change at 1100: the first process dealt with arrivals 0-199 and aborted 30 in flight,
# arrivals 200-209 fell while it restarted, the second dealt with 210-299 until the demo
# stopped it at 1200 with 12 in flight.
RESTARTED = [
    line(ready_at=998.0, stopped_at=1100.0, completed=165, aborted=30, rejected=5, met=120,
         first=0, next_=200, tokens=20_000, good_tokens=9_000, preemptions=70),
    line(ready_at=1106.0, stopped_at=1200.5, seqs=36, completed=78, aborted=12, met=70,
         first=210, next_=300, tokens=8_000, good_tokens=6_000, preemptions=4),
]  # fmt: skip


def test_counts_split_restart_aborts_from_the_ones_the_end_cut_off() -> None:
    counts = request_counts(RESTARTED, ended_at=1200.0)
    assert counts == {
        "arrived": 300,
        "completed": 243,
        "met_slo": 190,
        "aborted_by_restarts": 30,
        "rejected": 5,
        "missed_while_down": 10,
        "in_flight_at_end": 12,
    }
    # Every arrival is accounted for exactly once.
    assert sum(v for k, v in counts.items() if k not in ("arrived", "met_slo")) == 300
    assert slo_attainment(counts) == pytest.approx(190 / 288)


def test_a_last_process_stopped_by_a_restart_while_loading_cut_off_nothing() -> None:
    # The demo ended (1105) while the restarted process was still loading: the first
    # process's aborts were the restart's, and the second never served.
    lines = [RESTARTED[0], line(ready_at=None, stopped_at=1105.2, seqs=36)]
    counts = request_counts(lines, ended_at=1105.0)
    assert counts["aborted_by_restarts"] == 30
    assert counts["in_flight_at_end"] == 0
    # Had the demo ended while the first process still served, they would be the end's.
    counts = request_counts([RESTARTED[0]], ended_at=1099.0)
    assert counts["aborted_by_restarts"] == 0
    assert counts["in_flight_at_end"] == 30


def test_no_line_means_nothing_to_judge() -> None:
    counts = request_counts([], ended_at=ORIGIN)
    assert counts["arrived"] == 0
    assert slo_attainment(counts) is None


def test_summary_rates_are_over_the_run_and_restarts_are_the_processes_after_the_first() -> None:
    proposal = {"id": "p1", "policy": "kv-thrash", "target": "main", "state": "pending",
                "changes": {"max_num_seqs": {"old": 48.0, "new": 36.0}}, "hash": "h",
                "created_at": "1970-01-01T00:16:30+00:00"}  # fmt: skip
    answer = Answer(95.0, proposal, "approve", True, "approved", "approved by unix:me")
    action = {"id": 1, "policy": "kv-thrash", "target": "main", "state": "done",
              "outcome": "applied and verified", "timings": {"restart": 1.0}}  # fmt: skip
    summary = summarise(
        RESTARTED,
        origin=ORIGIN,
        ended_at=1200.0,
        answers=[answer],
        actions=[action],
        final_states={"p1": "verified"},
        context={"workload": "w"},
    )
    assert summary["run_s"] == pytest.approx(200.5)
    assert summary["goodput_rps"] == pytest.approx(190 / 200.5)
    assert summary["goodput_tok_s"] == pytest.approx(15_000 / 200.5)
    assert summary["throughput_tok_s"] == pytest.approx(28_000 / 200.5)
    assert summary["restarts"] == 1
    assert summary["preemptions"] == 74
    assert [p["max_num_seqs"] for p in summary["processes"]] == [48, 36]
    assert summary["processes"][1]["from_s"] == pytest.approx(106.0)
    assert summary["processes"][0]["slo_attainment"] == pytest.approx(120 / 200)
    # The last process is judged on what it finished, not on what the end cut off.
    assert summary["processes"][1]["slo_attainment"] == pytest.approx(70 / 78)
    assert summary["proposals"] == [
        {"id": "p1", "made_at_s": -10.0, "at_s": 95.0,
         "change": "kv-thrash on main: max_num_seqs 48 -> 36",
         "answer": "approve", "accepted": True, "state": "verified",
         "reason": "approved by unix:me", "prediction": None}
    ]  # fmt: skip
    assert summary["actions"][0]["state"] == "done"
    assert summary["workload"] == "w"
    text = "\n".join(render(summary))
    assert "300 requests arrived" in text
    assert "SLO attainment 66.0%" in text
    assert "restarts 1" in text


def test_after_vs_before_compares_the_last_serving_process_with_the_first() -> None:
    summary = summarise(
        RESTARTED,
        origin=ORIGIN,
        ended_at=1200.0,
        answers=[],
        actions=[],
        final_states={},
        context={},
    )
    comparison = summary["after_vs_before"]
    # Each on what it completed: the first process's restart aborts and refusals are left out.
    assert comparison["before"] == pytest.approx(120 / 165)
    assert comparison["after"] == pytest.approx(70 / 78)
    assert comparison["before_settings"] == {"max_num_seqs": 48, "max_num_batched_tokens": 8192}
    assert comparison["after_settings"]["max_num_seqs"] == 36
    text = "\n".join(render(summary))
    assert "met the SLO for 89.7% of the requests it completed, against 72.7% before" in text


def test_a_restart_that_kept_the_settings_is_not_the_before() -> None:
    # The disk act restarts the server on the same settings (quieter logs), then the tuned
    # change restarts it on new ones: the before/after is the tuned change's.
    three = [
        line(ready_at=998.0, stopped_at=1020.0, completed=100, met=100, first=0, next_=100),
        line(ready_at=1025.0, stopped_at=1100.0, completed=200, met=120, first=110,
             next_=320),
        line(ready_at=1106.0, stopped_at=1200.0, seqs=36, completed=78, met=70, first=330,
             next_=420),
    ]  # fmt: skip
    summary = summarise(
        three, origin=ORIGIN, ended_at=1200.0, answers=[], actions=[], final_states={}, context={}
    )
    comparison = summary["after_vs_before"]
    assert comparison["before"] == pytest.approx(120 / 200)
    assert comparison["after"] == pytest.approx(70 / 78)
    same = [
        line(ready_at=998.0, stopped_at=1020.0, completed=10, met=9, first=0, next_=10),
        line(ready_at=1025.0, stopped_at=1200.0, completed=10, met=9, first=12, next_=22),
    ]
    alone = summarise(
        same, origin=ORIGIN, ended_at=1200.0, answers=[], actions=[], final_states={}, context={}
    )
    assert alone["after_vs_before"] is None


def test_without_a_restart_there_is_no_before_and_after() -> None:
    alone = [line(ready_at=998.0, stopped_at=1200.0, completed=10, met=9, first=0, next_=10)]
    summary = summarise(
        alone, origin=ORIGIN, ended_at=1200.0, answers=[], actions=[], final_states={}, context={}
    )
    assert summary["after_vs_before"] is None
    assert "after the change" not in "\n".join(render(summary))


def test_the_summary_opens_with_the_outcome_in_plain_words() -> None:
    # issue 19, finding 9: 'served from -5 s', 'arrived in 429 s' for a 420 s workload, two
    # percentages for one process, the restart's cost without its drain, the approval stamped
    # with the proposal's time.
    proposal = {"id": "p1", "policy": "ttft-queue", "target": "main", "state": "pending",
                "changes": {"max_num_batched_tokens": {"old": 256.0, "new": 320.0}},
                "created_at": "1970-01-01T00:18:16+00:00"}  # fmt: skip
    answer = Answer(101.5, proposal, "approve", True, "approved", "")
    action = {"id": 1, "policy": "ttft-queue", "target": "main", "state": "done",
              "outcome": "applied and verified", "timings": {"restart": 9.6, "ready": 5.5}}  # fmt: skip
    summary = summarise(
        RESTARTED, origin=ORIGIN, ended_at=1200.0, answers=[answer], actions=[action],
        final_states={"p1": "verified"}, context={"duration_s": 200.0},
    )  # fmt: skip
    lines = render(summary)
    assert lines[0] == (
        "outcome: after the change (max-num-seqs 48 -> 36), the server met the SLO for 89.7% "
        "of the requests it completed, against 72.7% before it (the same traffic; what the "
        "restart refused or aborted counts as missed in the totals below)"
    )
    text = "\n".join(lines)
    assert "300 requests arrived over the 200 s workload" in text
    assert "-2 s" not in text
    assert "served from the start to 1:40: the SLO was met by 72.7% of the 165 requests" in text
    assert "served from 1:46 to 3:20: the SLO was met by 89.7% of the 78 requests" in text
    assert "of its judged requests" not in text
    assert summary["restart_costs"] == [
        {"at_s": 90.4, "draining_s": 9.6, "loading_s": 6.0, "refused_while_draining": 5,
         "aborted": 30, "missed_while_down": 10}
    ]  # fmt: skip
    assert (
        "the restart at 1:30 cost 16 s without taking new requests (draining and stopping "
        "10 s, loading 6 s): 5 requests refused while it drained, 10 missed while it loaded, "
        "30 aborted"
    ) in text
    assert (
        "proposal p1: ttft-queue on main: max_num_batched_tokens 256 -> 320: made at 1:36, "
        "approved at 1:41; finally verified"
    ) in text


def test_without_a_change_the_outcome_says_the_server_kept_its_settings() -> None:
    alone = [line(ready_at=998.0, stopped_at=1200.0, completed=10, met=9, first=0, next_=10)]
    summary = summarise(
        alone, origin=ORIGIN, ended_at=1200.0, answers=[], actions=[], final_states={}, context={}
    )
    assert render(summary)[0] == (
        "outcome: the server kept its starting settings and met the SLO for 90.0% of the requests"
    )


def test_a_gated_restart_counts_the_gate_s_drain_and_only_its_own_refusals() -> None:
    # The first process (ready at -2 s) refused 40 at its gate: 30 in a burst at 10-12 s, and
    # 10 that arrived while the governor drained the gate before the restart (from 94 s on).
    first, second = (dict(line_) for line_ in RESTARTED)
    first["requests"] = {"completed": 165, "aborted": 0, "rejected": 40}
    first["gate"] = {"refused": 40, "by_arrival_second": [[12, 50, 20], [13, 30, 10], [97, 12, 10]]}
    action = {"id": 1, "policy": "ttft-queue", "target": "main", "state": "done",
              "outcome": "applied and verified",
              "timings": {"drain": 4.6, "restart": 1.4, "ready": 5.5}}  # fmt: skip
    summary = summarise(
        [first, second], origin=ORIGIN, ended_at=1200.0, answers=[], actions=[action],
        final_states={}, context={"duration_s": 200.0},
    )  # fmt: skip
    [cost] = summary["restart_costs"]
    assert cost["at_s"] == pytest.approx(94.0)
    assert cost["draining_s"] == pytest.approx(6.0)
    assert cost["refused_while_draining"] == 10
    assert (
        "the restart at 1:34 cost 12 s without taking new requests (draining and stopping 6 s, "
        "loading 6 s): 10 requests refused while it drained"
    ) in "\n".join(render(summary))
