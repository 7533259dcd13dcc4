"""A group change's rollout: its legal moves, table by table (pure, no etcd)."""

from __future__ import annotations

import pytest

from daemon.fleet.canary_analysis import CanaryRule, ServerCounts, judge_canary
from daemon.fleet.rollout_state import (
    MemberReport,
    Phase,
    Rollout,
    RolloutMoveError,
    Step,
    abort,
    approve,
    assign,
    fold_report,
    judge,
    propose,
    reject,
    unchanged_members,
)

MEMBERS = ("h1/main", "h2/main", "h3/main", "h4/main")
NOW = "2026-12-02T04:00:00+00:00"
GOOD = ServerCounts("x", 600, 570, 0, 60)
BAD = ServerCounts("x", 600, 400, 0, 60)


def _approved(canary: str = "h2/main") -> Rollout:
    return approve(propose("llama", "kv-thrash", {"max_num_seqs": 48}, MEMBERS, canary), "ops")


def _ok(member: str, asked: Step = Step.APPLY) -> MemberReport:
    return MemberReport(member, asked, ok=True, detail="done")


def _analysing() -> Rollout:
    return fold_report(_approved(), _ok("h2/main"), NOW)


def test_approval_asks_the_canary_alone() -> None:
    rollout = _approved()
    assert rollout.phase is Phase.CANARY
    assert [m for m in MEMBERS if rollout.duty(m)] == ["h2/main"]
    assert rollout.duty("h2/main") is Step.APPLY


def test_the_canary_changed_starts_the_window_against_the_members_not_yet_changed() -> None:
    rollout = _analysing()
    assert rollout.phase is Phase.ANALYSIS
    assert rollout.analysis_since == NOW
    assert unchanged_members(rollout) == ("h1/main", "h3/main", "h4/main")
    assert not any(rollout.duty(m) for m in MEMBERS)


def test_a_passing_canary_rolls_the_rest_within_max_unavailable() -> None:
    verdict = judge_canary(CanaryRule(), [GOOD], [GOOD, GOOD])
    rollout = assign(judge(_analysing(), verdict), slots=1)
    assert rollout.phase is Phase.ROLLING
    assert rollout.verdict == verdict
    assert [m for m in MEMBERS if rollout.duty(m)] == ["h1/main"]
    assert assign(rollout, slots=1) == rollout  # one in flight: nobody else is asked
    for member in ("h1/main", "h3/main"):
        rollout = assign(fold_report(rollout, _ok(member), NOW), slots=1)
    assert [m for m in MEMBERS if rollout.duty(m)] == ["h4/main"]
    rollout = fold_report(rollout, _ok("h4/main"), NOW)
    assert rollout.phase is Phase.DONE
    assert rollout.history[-1] == "every member changed"


def test_two_slots_ask_two_members_at_once() -> None:
    verdict = judge_canary(CanaryRule(), [GOOD], [GOOD])
    rollout = assign(judge(_analysing(), verdict), slots=2)
    assert [m for m in MEMBERS if rollout.duty(m)] == ["h1/main", "h3/main"]


def test_a_failing_canary_is_reverted_and_the_rollout_stops_with_its_evidence() -> None:
    verdict = judge_canary(CanaryRule(), [BAD], [GOOD, GOOD, GOOD])
    rollout = judge(_analysing(), verdict)
    assert rollout.phase is Phase.REVERTING
    assert rollout.duty("h2/main") is Step.REVERT
    assert rollout.history[-1].startswith("canary failed: SLO attainment 66.7% vs 95.0%")
    with pytest.raises(RolloutMoveError):
        assign(rollout, slots=1)
    rollout = fold_report(rollout, _ok("h2/main", Step.REVERT), NOW)
    assert rollout.phase is Phase.ABORTED
    assert rollout.step("h2/main") is Step.REVERTED
    assert not any(rollout.duty(m) for m in MEMBERS)


def test_a_member_whose_change_fails_stops_the_rollout() -> None:
    verdict = judge_canary(CanaryRule(), [GOOD], [GOOD])
    rollout = assign(judge(_analysing(), verdict), slots=1)
    failed = MemberReport("h1/main", Step.APPLY, ok=False, detail="refused (restart_slot)")
    rollout = fold_report(rollout, failed, NOW)
    assert rollout.phase is Phase.ABORTED
    assert rollout.history[-1] == "h1/main: apply failed (refused (restart_slot))"


@pytest.mark.parametrize(
    ("move", "why"),
    [
        (lambda r: approve(r, "ops"), "cannot approve: rollout of llama is canary"),
        (lambda r: reject(r, "ops"), "cannot reject: rollout of llama is canary"),
        (lambda r: assign(r, 1), "cannot assign members: rollout of llama is canary"),
        (lambda r: fold_report(r, _ok("h1/main"), NOW), "h1/main reports on apply, but its"),
        (lambda r: fold_report(r, _ok("h9/main"), NOW), "h9/main reports on apply, but its"),
    ],
)
def test_a_move_the_state_does_not_allow_is_refused(move: object, why: str) -> None:
    with pytest.raises(RolloutMoveError, match=why):
        move(_approved())  # type: ignore[operator]


def test_a_finished_rollout_asks_nothing_and_cannot_be_aborted_again() -> None:
    rollout = abort(_approved(), "driver gone")
    assert rollout.phase is Phase.ABORTED
    assert rollout.duty("h2/main") is None  # the canary's APPLY is no longer asked
    with pytest.raises(RolloutMoveError, match="already aborted"):
        abort(rollout, "again")


def test_a_rejected_proposal_changes_nothing() -> None:
    rollout = reject(propose("llama", "kv-thrash", {"max_num_seqs": 48}, MEMBERS, "h1/main"), "x")
    assert rollout.phase is Phase.REJECTED
    assert rollout.phase.finished


def test_the_stored_form_reads_back_the_same_and_a_foreign_one_is_refused() -> None:
    verdict = judge_canary(CanaryRule(), [BAD], [GOOD])
    rollout = judge(_analysing(), verdict)
    assert Rollout.from_json(rollout.to_json()) == rollout
    assert MemberReport.from_json(_ok("h1/main").to_json()) == _ok("h1/main")
    with pytest.raises(RolloutMoveError, match="rollout format 2"):
        Rollout.from_json(rollout.to_json().replace(b'"version": 1', b'"version": 2'))
    with pytest.raises(RolloutMoveError):
        Rollout.from_json(b"[]")


def test_a_canary_outside_the_group_or_no_values_is_no_rollout() -> None:
    with pytest.raises(RolloutMoveError, match="not a member"):
        propose("llama", "p", {"max_num_seqs": 48}, MEMBERS, "h9/main")
    with pytest.raises(RolloutMoveError, match="needs knob values"):
        propose("llama", "p", {}, MEMBERS, "h1/main")


def test_approval_takes_in_the_members_registered_since_the_proposal() -> None:
    proposed = propose("llama", "p", {"max_num_seqs": 48}, ("h1/main",), "h1/main")
    rollout = approve(proposed, "ops", frozenset({"h3/main", "h2/main"}))
    assert rollout.members == ("h1/main", "h2/main", "h3/main")  # the canary stays in
    assert unchanged_members(rollout) == ("h2/main", "h3/main")
