"""The driver's one look at a rollout: what the fleet reported, turned into the next state (pure).

:func:`advance` is what a rollout's driver does at each look, a function of the rollout, the
members' reports and published counts, the members registered now, the time and the group's
budget. It takes in every report that answers what a member was asked (a report for another
step is an earlier rollout's, or one already taken in, and is left alone); starts the
analysis when the window has passed and every side's counts are in (or half a window later
with what is in: a silent member is missing data, and too little data fails); asks the next
members within the budget. A member asked to act whose governor is no longer registered
(its lease gone) would never answer: the rollout is aborted rather than left waiting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from daemon.fleet.canary_analysis import ServerCounts, judge_canary
from daemon.fleet.rollout_state import (
    MemberReport,
    Phase,
    Rollout,
    abort,
    assign,
    fold_report,
    judge,
    unchanged_members,
)


def advance(
    rollout: Rollout,
    *,
    reports: Iterable[MemberReport],
    figures: Mapping[str, ServerCounts],
    registered: frozenset[str],
    now: datetime,
    slots: int,
) -> Rollout:
    """The rollout after one look (the same rollout when nothing moved)."""
    for report in reports:
        if rollout.phase.finished:
            break
        if rollout.duty(report.member) is report.asked:
            rollout = fold_report(rollout, report, now.isoformat())
    if rollout.phase is Phase.ANALYSIS:
        rollout = _judged_when_due(rollout, figures, now)
    if rollout.phase is Phase.ROLLING:
        rollout = assign(rollout, slots)
    silent = [m for m in rollout.members if rollout.duty(m) and m not in registered]
    if silent:
        rollout = abort(rollout, f"{', '.join(silent)} no longer registered: nobody to act")
    return rollout


def analysis_due(rollout: Rollout, now: datetime) -> bool:
    """Whether the canary's comparison window has passed (members publish their counts)."""
    if rollout.phase is not Phase.ANALYSIS or not rollout.analysis_since:
        return False
    since = datetime.fromisoformat(rollout.analysis_since)
    return now >= since + timedelta(seconds=rollout.rule.window_s)


def _judged_when_due(
    rollout: Rollout, figures: Mapping[str, ServerCounts], now: datetime
) -> Rollout:
    if not analysis_due(rollout, now):
        return rollout
    baseline = unchanged_members(rollout)
    expected = (rollout.canary, *baseline)
    since = datetime.fromisoformat(rollout.analysis_since)
    late = now >= since + timedelta(seconds=rollout.rule.window_s * 1.5)
    if not late and any(member not in figures for member in expected):
        return rollout
    canary = [figures[rollout.canary]] if rollout.canary in figures else []
    others = [figures[member] for member in baseline if member in figures]
    return judge(rollout, judge_canary(rollout.rule, canary, others))
