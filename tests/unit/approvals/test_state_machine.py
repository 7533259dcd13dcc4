"""The state machine: every click is judged against the rules and a fresh look at the world."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import pytest

from daemon.approvals.authorisation import ApprovalRules
from daemon.approvals.clicks import Action, Click
from daemon.approvals.errors import InvalidTransition
from daemon.approvals.proposal import RiskClass
from daemon.approvals.records import ProposalRecord, State, move
from daemon.approvals.state_machine import (
    Recheck,
    Refusal,
    applied,
    decide,
    expire,
    failed,
    reverted,
    supersede,
    verified,
    withdraw,
)
from tests.unit.approvals.examples import (
    ALICE,
    BOB,
    CAROL,
    FRESH,
    MALLORY,
    RULES,
    SRE_GROUP,
    TTL_S,
    TWO_PERSON,
    click,
    record,
)

PENDING = record()
WRONG_HASH = "0" * 64


@dataclass(frozen=True)
class Case:
    """One click on the pending kv-thrash proposal, and what it must do."""

    name: str
    click: Click
    state: State
    refusal: Refusal | None
    recheck: Recheck = FRESH
    rules: ApprovalRules = RULES
    start: ProposalRecord = PENDING

    @property
    def apply(self) -> bool:
        return self.state is State.APPROVED


CASES = [
    Case("approve", click(PENDING), State.APPROVED, None),
    Case("reject", click(PENDING, action=Action.REJECT), State.REJECTED, None),
    Case(
        "approve by a group member",
        click(PENDING, CAROL, groups=frozenset({SRE_GROUP})),
        State.APPROVED,
        None,
    ),
    Case("unauthorised approve", click(PENDING, MALLORY), State.PENDING, Refusal.UNAUTHORISED),
    Case(
        "unauthorised reject",
        click(PENDING, MALLORY, Action.REJECT),
        State.PENDING,
        Refusal.UNAUTHORISED,
    ),
    Case(
        "groups claimed by nobody",
        click(PENDING, CAROL, groups=frozenset({"S0X"})),
        State.PENDING,
        Refusal.UNAUTHORISED,
    ),
    Case(
        "no allow-list at all",
        click(PENDING),
        State.PENDING,
        Refusal.UNAUTHORISED,
        rules=ApprovalRules(),
    ),
    Case("wrong hash", click(PENDING, hash_hex=WRONG_HASH), State.PENDING, Refusal.WRONG_HASH),
    Case(
        "another proposal's button",
        click(PENDING, proposal_id="p000000000"),
        State.PENDING,
        Refusal.WRONG_PROPOSAL,
    ),
    Case("at the expiry time", click(PENDING, after_s=TTL_S), State.EXPIRED, Refusal.EXPIRED),
    Case(
        "reject after expiry",
        click(PENDING, action=Action.REJECT, after_s=TTL_S + 1),
        State.EXPIRED,
        Refusal.EXPIRED,
    ),
    Case("just before expiry", click(PENDING, after_s=TTL_S - 0.001), State.APPROVED, None),
    Case(
        "stale: the knob moved",
        click(PENDING),
        State.STALE,
        Refusal.STALE,
        recheck=replace(FRESH, knobs={"max_num_seqs": 224.0}),
    ),
    Case(
        "superseded",
        click(PENDING),
        State.SUPERSEDED,
        Refusal.SUPERSEDED,
        recheck=replace(FRESH, newer_proposal="p1234567890"),
    ),
    Case(
        "the condition cleared",
        click(PENDING),
        State.NO_LONGER_NEEDED,
        Refusal.NO_LONGER_NEEDED,
        recheck=replace(FRESH, condition_holds=False),
    ),
    Case(
        "the condition is not known",
        click(PENDING),
        State.PENDING,
        Refusal.UNCERTAIN,
        recheck=replace(FRESH, condition_holds=None),
    ),
    Case(
        "the knob is not known",
        click(PENDING),
        State.PENDING,
        Refusal.UNCERTAIN,
        recheck=replace(FRESH, knobs={"max_num_seqs": None}),
    ),
    Case(
        "a freeze",
        click(PENDING),
        State.PENDING,
        Refusal.FROZEN,
        recheck=replace(FRESH, freeze="incident 42 until 16:00"),
    ),
    Case(
        "a veto",
        click(PENDING),
        State.PENDING,
        Refusal.VETOED,
        recheck=replace(FRESH, veto="gpu-throttling"),
    ),
    Case(
        "reject during a freeze",
        click(PENDING, action=Action.REJECT),
        State.REJECTED,
        None,
        recheck=replace(FRESH, freeze="incident"),
    ),
    Case(
        "already rejected",
        click(PENDING),
        State.REJECTED,
        Refusal.ALREADY_DECIDED,
        start=move(PENDING, State.REJECTED, PENDING.proposal.created_at),
    ),
    Case(
        "a replayed click",
        click(PENDING, click_id="slack:U0ALICE:approve:1.1"),
        State.PENDING,
        Refusal.REPLAYED,
        start=PENDING.saw("slack:U0ALICE:approve:1.1"),
    ),
    Case(
        "stale outranks a freeze",
        click(PENDING),
        State.STALE,
        Refusal.STALE,
        recheck=Recheck(True, {"max_num_seqs": 100.0}, freeze="incident"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_one_click(case: Case) -> None:
    outcome = decide(case.start, case.click, case.recheck, case.rules)
    assert outcome.record.state is case.state
    assert outcome.refusal is case.refusal
    assert outcome.apply is case.apply
    assert outcome.message
    if outcome.record.state is not case.start.state:
        assert outcome.record.changed_at == case.click.at
        assert outcome.record.decided_by is not None
        assert outcome.record.decided_by.user == case.click.user


def test_a_refusal_that_closes_the_proposal_gives_its_reason() -> None:
    outcome = decide(PENDING, click(PENDING), replace(FRESH, knobs={"max_num_seqs": 224.0}), RULES)
    assert outcome.record.reason == "max_num_seqs is now 224; the proposal assumed 256"
    assert outcome.message == outcome.record.reason


def test_suspicious_clicks_leave_the_record_untouched() -> None:
    for bad in [click(PENDING, MALLORY), click(PENDING, hash_hex=WRONG_HASH)]:
        assert decide(PENDING, bad, FRESH, RULES).record is PENDING


def test_a_double_click_applies_once() -> None:
    first = decide(PENDING, click(PENDING, after_s=60), FRESH, RULES)
    again = decide(first.record, click(PENDING, after_s=61), FRESH, RULES)
    replayed = decide(again.record, click(PENDING, after_s=60), FRESH, RULES)
    by_bob = decide(replayed.record, click(PENDING, BOB, after_s=62), FRESH, RULES)
    assert [o.apply for o in (first, again, replayed, by_bob)] == [True, False, False, False]
    assert [o.refusal for o in (again, replayed, by_bob)] == [
        Refusal.ALREADY_DECIDED,
        Refusal.REPLAYED,
        Refusal.ALREADY_DECIDED,
    ]
    assert by_bob.message.startswith("already approved by U0ALICE at 2026-05-04 14:31 UTC")


def test_a_click_refused_during_a_freeze_cannot_be_replayed_after_it() -> None:
    during = decide(PENDING, click(PENDING), replace(FRESH, freeze="incident"), RULES)
    replayed = decide(during.record, click(PENDING), FRESH, RULES)
    assert (during.refusal, replayed.refusal) == (Refusal.FROZEN, Refusal.REPLAYED)
    fresh_click = decide(during.record, click(PENDING, after_s=120), FRESH, RULES)
    assert fresh_click.apply


def test_two_person_rule_needs_two_distinct_approvers() -> None:
    first = decide(PENDING, click(PENDING, ALICE, after_s=10), FRESH, TWO_PERSON)
    assert (first.record.state, first.refusal, first.apply) == (State.PENDING, None, False)
    assert first.message == "approval 1 of 2: waiting for another approver"
    same = decide(first.record, click(PENDING, ALICE, after_s=20), FRESH, TWO_PERSON)
    assert (same.refusal, same.apply) == (Refusal.SAME_APPROVER, False)
    second = decide(same.record, click(PENDING, BOB, after_s=30), FRESH, TWO_PERSON)
    assert (second.record.state, second.apply) == (State.APPROVED, True)
    assert [vote.user for vote in second.record.approvals] == [ALICE, BOB]
    assert second.record.decided_by is not None
    assert second.record.decided_by.user == BOB  # the second approval applies


def test_two_person_rule_rechecks_at_the_second_approval() -> None:
    first = decide(PENDING, click(PENDING, ALICE), FRESH, TWO_PERSON)
    second = decide(
        first.record, click(PENDING, BOB), replace(FRESH, knobs={"max_num_seqs": 1.0}), TWO_PERSON
    )
    assert (second.record.state, second.refusal, second.apply) == (
        State.STALE,
        Refusal.STALE,
        False,
    )


def test_two_person_rule_one_reject_is_enough() -> None:
    first = decide(PENDING, click(PENDING, ALICE), FRESH, TWO_PERSON)
    second = decide(first.record, click(PENDING, BOB, Action.REJECT), FRESH, TWO_PERSON)
    assert (second.record.state, second.apply) == (State.REJECTED, False)


def test_two_person_rule_is_only_for_the_classes_it_names() -> None:
    change = replace(PENDING, proposal=replace(PENDING.proposal, risk=RiskClass.CHANGE))
    outcome = decide(change, click(change), FRESH, TWO_PERSON)
    assert (outcome.record.state, outcome.apply) == (State.APPROVED, True)


def test_expiry_is_idempotent_and_waits_for_its_time() -> None:
    expires_at = PENDING.proposal.expires_at
    assert expire(PENDING, expires_at - timedelta(seconds=1)) is PENDING
    expired = expire(PENDING, expires_at)
    assert expired.state is State.EXPIRED
    assert expired.reason == "nobody decided before 2026-05-04 15:00 UTC"
    assert expire(expired, expires_at + timedelta(hours=1)) is expired


def test_the_life_after_approval() -> None:
    approved = decide(PENDING, click(PENDING), FRESH, RULES).record
    at = PENDING.proposal.created_at + timedelta(minutes=2)
    done = applied(approved, at, "vLLM restarted in 58 s")
    assert verified(done, at).state is State.VERIFIED
    assert reverted(done, at, "TTFT got worse").state is State.REVERTED
    assert failed(approved, at, "preflight: envelope changed").state is State.FAILED
    assert verified(done, at).final
    assert not done.final


@pytest.mark.parametrize(
    ("name", "step"),
    [
        ("apply a pending proposal", applied),
        ("verify a pending proposal", verified),
        (
            "supersede a rejected one",
            lambda r, at: supersede(move(r, State.REJECTED, at), "p1", at),
        ),
        (
            "withdraw an approved one",
            lambda r, at: withdraw(move(r, State.APPROVED, at), at, "gone"),
        ),
        ("apply twice", lambda r, at: applied(applied(move(r, State.APPROVED, at), at), at)),
    ],
)
def test_forbidden_steps_raise(
    name: str, step: Callable[[ProposalRecord, datetime], ProposalRecord]
) -> None:
    with pytest.raises(InvalidTransition):
        step(PENDING, PENDING.proposal.created_at)


def test_pending_proposals_can_be_superseded_or_withdrawn() -> None:
    at = PENDING.proposal.created_at
    assert supersede(PENDING, "p1", at).reason == "superseded by proposal p1"
    assert withdraw(PENDING, at, "the condition cleared").state is State.NO_LONGER_NEEDED
