"""A group change's approved proposal follows its rollout: its states, and the store's column."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from daemon.approvals.errors import InvalidTransition
from daemon.approvals.records import State, move
from daemon.approvals.state_machine import rollout_moved
from daemon.engine.approvals.rollout_follower import where
from daemon.engine.storage import proposal_store
from daemon.engine.storage.proposal_store import ProposalStore
from daemon.engine.storage.state_db import Schema, connect, schema_version
from daemon.fleet.canary_analysis import CanaryRule, ServerCounts, judge_canary
from daemon.fleet.rollout_state import (
    MemberReport,
    Rollout,
    Step,
    abort,
    approve,
    fold_report,
    judge,
    propose,
)
from tests.unit.approvals.examples import T0, record

MEMBERS = ("h1/main", "h2/main", "h3/main")
NOW = "2026-12-02T04:00:00+00:00"
GOOD = ServerCounts("x", 600, 570, 0, 60)
BAD = ServerCounts("x", 600, 400, 0, 60)


def _proposed() -> Rollout:
    return propose("llama", "kv-thrash", {"max_num_seqs": 48}, MEMBERS, "h2/main")


def _canary(proposal: str = "p1") -> Rollout:
    return approve(_proposed(), "ops", proposal=proposal)


def _judged(counts: ServerCounts) -> Rollout:
    analysing = fold_report(_canary(), MemberReport("h2/main", Step.APPLY, True, "done"), NOW)
    return judge(analysing, judge_canary(CanaryRule(), [counts], [GOOD, GOOD]))


def _rolled_back() -> Rollout:
    return fold_report(_judged(BAD), MemberReport("h2/main", Step.REVERT, True, "done"), NOW)


def _rolled_out() -> Rollout:
    rollout = _judged(GOOD)
    for member in ("h1/main", "h3/main"):
        asked = replace(rollout, steps={**rollout.steps, member: Step.APPLY})
        rollout = fold_report(asked, MemberReport(member, Step.APPLY, True, "done"), NOW)
    return rollout


@pytest.mark.parametrize(
    ("rollout", "state", "detail"),
    [
        (_proposed(), None, ""),  # the decision is on its way to the rollout
        (
            _canary(),
            State.ROLLING_OUT,
            "canary, canary h2/main: 0 of 3 members changed; "
            "approved by ops; canary h2/main asked to apply",
        ),
        (_rolled_out(), State.ROLLED_OUT, "3 of 3 members changed; every member changed"),
        (_rolled_back(), State.ROLLED_BACK, "0 of 3 members changed; h2/main: revert done (done)"),
        (
            abort(_judged(GOOD), "h1/main no longer registered"),
            State.ABORTED,
            "1 of 3 members changed; aborted: h1/main no longer registered",
        ),
        (_canary("p0"), State.ABORTED, "its rollout was replaced by proposal p0's"),
        (None, State.ABORTED, "its rollout is no longer in etcd"),
    ],
    ids=["proposed", "canary", "rolled-out", "rolled-back", "aborted", "replaced", "gone"],
)
def test_the_record_says_where_its_rollout_is(
    rollout: Rollout | None, state: State | None, detail: str
) -> None:
    moved = where("p1", rollout)
    assert moved == (None if state is None else (state, detail))


def test_a_rollout_moves_the_record_from_approved_to_an_end_and_no_further() -> None:
    approved = move(record(), State.APPROVED, T0)
    rolling = rollout_moved(approved, State.ROLLING_OUT, T0, "canary")
    assert rollout_moved(rolling, State.ROLLING_OUT, T0, "canary") is rolling  # nothing to write
    assert rollout_moved(rolling, State.ROLLING_OUT, T0, "rolling").reason == "rolling"
    ended = rollout_moved(rolling, State.ROLLED_BACK, T0, "reverted")
    assert ended.final
    assert rollout_moved(approved, State.ROLLED_OUT, T0, "done").state is State.ROLLED_OUT
    with pytest.raises(InvalidTransition):
        rollout_moved(ended, State.ROLLED_OUT, T0, "done")


def test_the_store_migrates_and_lists_only_the_group_changes_still_rolling(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite3"
    first = Schema("approvals", proposal_store.SCHEMA.migrations[:1])
    connect(path, first).close()  # a file from the governor before rollouts had states
    store = ProposalStore(path)
    try:
        group = move(record(), State.APPROVED, T0)
        alone = move(record(new=128.0), State.APPROVED, T0)
        store.insert(group)
        store.insert(alone)
        store.follow(group.proposal.id, "llama")
        assert [s.record.proposal.id for s in store.following()] == [group.proposal.id]
        assert store.following()[0].rollout_group == "llama"
        # The approved-changes runner's recovery leaves the group change to its rollout.
        assert [s.record.proposal.id for s in store.approved()] == [alone.proposal.id]
        stored = store.following()[0]
        rolled = rollout_moved(stored.record, State.ROLLED_OUT, T0, "done")
        assert store.save(rolled, stored.revision)
        assert store.following() == []
        saved = store.get(group.proposal.id)
        assert saved is not None
        assert saved.record.state is State.ROLLED_OUT
    finally:
        store.close()
    db = sqlite3.connect(path)
    try:
        assert schema_version(db, "approvals") == 2
    finally:
        db.close()
