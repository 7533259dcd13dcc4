"""A rollout's lines for its proposal's Slack thread, and the fields that carry the thread (pure)."""

from __future__ import annotations

import json

from daemon.fleet.canary_analysis import CanaryRule, ServerCounts, judge_canary
from daemon.fleet.rollout_lines import END, outcome_of, thread_lines
from daemon.fleet.rollout_state import (
    MemberReport,
    Phase,
    Rollout,
    Step,
    abort,
    approve,
    assign,
    fold_report,
    judge,
    propose,
    reject,
)

MEMBERS = ("h1/main", "h2/main", "h3/main")
NOW = "2026-12-02T04:00:00+00:00"
RULE = CanaryRule(window_s=10.0, ttft_slo_s=1.0, min_requests=20)
GOOD = ServerCounts("x", 600, 570, 0, 60)
BAD = ServerCounts("x", 600, 400, 0, 60)


def _proposed() -> Rollout:
    return propose("llama", "kv-thrash", {"max_num_seqs": 48}, MEMBERS, "h2/main", rule=RULE)


def _approved() -> Rollout:
    return approve(_proposed(), "ops", proposal="p1", thread=("C1", "171.1"), at=NOW)


def _ok(member: str, asked: Step = Step.APPLY) -> MemberReport:
    return MemberReport(member, asked, ok=True, detail="done")


def _judged(counts: ServerCounts) -> Rollout:
    analysing = fold_report(_approved(), _ok("h2/main"), NOW)
    return judge(analysing, judge_canary(RULE, [counts], [GOOD, GOOD]))


def _rolled_out() -> Rollout:
    rollout = assign(_judged(GOOD), slots=1)
    for member in ("h1/main", "h3/main"):
        rollout = fold_report(rollout, _ok(member), NOW)
        rollout = assign(rollout, slots=1) if rollout.phase is Phase.ROLLING else rollout
    return rollout


def test_nobody_approved_no_lines() -> None:
    assert thread_lines(_proposed()) == []
    assert thread_lines(reject(_proposed(), "ops")) == []


def test_each_step_is_one_line_keyed_by_its_place_in_the_history() -> None:
    lines = thread_lines(_rolled_out())
    assert [line.key for line in lines] == [f"h{i}" for i in range(8)] + [END]
    assert lines[0].text == "approved by ops; canary h2/main asked to apply"
    assert lines[1].text == "h2/main: apply done (done)"
    assert lines[3].text == "asked to apply: h1/main"
    assert lines[-1].text == (
        ":white_check_mark: Rolled out: all 3 members of group llama run max_num_seqs=48."
    )
    # A later state keeps the earlier lines as they were: a key always names the same text.
    earlier = thread_lines(_judged(GOOD))
    assert lines[: len(earlier)] == earlier


def test_the_analysis_line_shows_both_sides_figures_and_the_verdict() -> None:
    analysis = thread_lines(_judged(GOOD))[2].text
    assert analysis.splitlines() == [
        "Canary analysis over 10 s (TTFT SLO 1 s): *passed*",
        "• canary h2/main: 600 requests, SLO attainment 95.0%, goodput 9.50 req/s per server,"
        " errors 0.0%",
        "• baseline, 2 unchanged member(s): 1200 requests, SLO attainment 95.0%,"
        " goodput 9.50 req/s per server, errors 0.0%",
        "Rolling to the other members, within the group's max_unavailable.",
    ]


def test_a_failed_canary_says_why_is_reverted_and_the_rollout_stops() -> None:
    failed = _judged(BAD)
    reverted = fold_report(failed, _ok("h2/main", Step.REVERT), NOW)
    lines = thread_lines(reverted)
    analysis = lines[2].text.splitlines()
    assert analysis[0] == "Canary analysis over 10 s (TTFT SLO 1 s): *failed*"
    assert "• SLO attainment 28.3 points lower (at most 5)" in analysis
    assert analysis[-1] == "h2/main asked to revert; the rollout stops."
    assert lines[3].text == "h2/main: revert done (done)"
    assert outcome_of(reverted) == "rolled_back"
    assert lines[-1].key == END
    assert lines[-1].text.startswith(":leftwards_arrow_with_hook: Rolled back: the canary h2/main")


def test_a_rollout_stopped_otherwise_is_aborted_and_says_who_runs_what() -> None:
    stopped = abort(assign(_judged(GOOD), slots=1), "h1/main no longer registered")
    assert outcome_of(stopped) == "aborted"
    assert thread_lines(stopped)[-1].text == (
        ":octagonal_sign: Rollout stopped (aborted: h1/main no longer registered). Running "
        "max_num_seqs=48 now: h2/main; 2 of 3 members not changed."
    )


def test_the_proposal_its_thread_and_times_travel_with_the_rollout() -> None:
    rollout = _approved()
    assert (rollout.proposal, rollout.thread, rollout.started_at) == ("p1", ("C1", "171.1"), NOW)
    assert Rollout.from_json(rollout.to_json()) == rollout


def test_a_rollout_written_before_those_fields_is_still_read() -> None:
    body = json.loads(_approved().to_json())
    for field in ("proposal", "thread", "driver", "started_at", "updated_at"):
        del body[field]
    older = Rollout.from_json(json.dumps(body).encode())
    assert older.phase is Phase.CANARY
    assert (older.proposal, older.thread, older.driver) == ("", ("", ""), "")
