"""The driver's one look (`advance`): reports, counts, registrations and time to the next state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from daemon.fleet.canary_analysis import CanaryRule, ServerCounts
from daemon.fleet.rollout_state import MemberReport, Phase, Rollout, Step, approve, propose
from daemon.fleet.rollout_steps import advance

MEMBERS = ("h1/main", "h2/main", "h3/main")
ALL = frozenset(MEMBERS)
T0 = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
RULE = CanaryRule(window_s=60, min_requests=20)
GOOD = {m: ServerCounts(m, 600, 570, 0, 60) for m in MEMBERS}


def _approved() -> Rollout:
    rollout = propose("llama", "p", {"max_num_seqs": 48}, MEMBERS, "h2/main", rule=RULE)
    return approve(rollout, "ops")


def _look(rollout: Rollout, **changes: object) -> Rollout:
    given: dict[str, object] = {
        "reports": [],
        "figures": {},
        "registered": ALL,
        "now": T0,
        "slots": 1,
    }
    given.update(changes)
    return advance(rollout, **given)  # type: ignore[arg-type]


def _analysing() -> Rollout:
    done = MemberReport(
        "h2/main", Step.APPLY, ok=True, detail="done", previous={"max_num_seqs": 64}
    )
    return _look(_approved(), reports=[done])


def test_the_canarys_report_starts_the_window_and_nothing_is_judged_inside_it() -> None:
    rollout = _analysing()
    assert rollout.phase is Phase.ANALYSIS
    assert rollout.analysis_since == T0.isoformat()
    inside = _look(rollout, figures=GOOD, now=T0 + timedelta(seconds=59))
    assert inside == rollout


def test_after_the_window_it_waits_for_every_sides_counts_then_judges_and_assigns() -> None:
    rollout = _analysing()
    after = T0 + timedelta(seconds=61)
    partial = {m: c for m, c in GOOD.items() if m != "h3/main"}
    assert _look(rollout, figures=partial, now=after) == rollout  # h3 has not published yet
    judged = _look(rollout, figures=GOOD, now=after)
    assert judged.phase is Phase.ROLLING
    assert [m for m in MEMBERS if judged.duty(m)] == ["h1/main"]


def test_half_a_window_late_it_judges_with_what_came_and_missing_data_fails() -> None:
    rollout = _analysing()
    late = T0 + timedelta(seconds=91)
    judged = _look(rollout, figures={"h2/main": GOOD["h2/main"]}, now=late)
    assert judged.phase is Phase.REVERTING
    assert judged.verdict is not None
    assert judged.verdict.failures == ("inconclusive: baseline finished 0 requests, fewer than 20",)


def test_a_report_for_a_step_not_asked_is_left_alone() -> None:
    stale = MemberReport("h1/main", Step.APPLY, ok=True, detail="an earlier rollout's")
    assert _look(_approved(), reports=[stale]) == _approved()


def test_a_member_asked_whose_governor_is_gone_aborts_the_rollout() -> None:
    rollout = _look(_approved(), registered=frozenset({"h1/main", "h3/main"}))
    assert rollout.phase is Phase.ABORTED
    assert rollout.history[-1] == "aborted: h2/main no longer registered: nobody to act"
