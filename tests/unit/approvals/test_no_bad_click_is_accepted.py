"""Zero accepted bad clicks: whatever sequence of clicks arrives, only a good one applies."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.approvals.authorisation import ApprovalRules
from daemon.approvals.clicks import Action, Click
from daemon.approvals.records import State
from daemon.approvals.state_machine import Recheck, decide
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
    record,
)

PENDING = record()
PROPOSAL = PENDING.proposal
GROUPS = {ALICE: frozenset[str](), BOB: frozenset[str](), CAROL: frozenset({SRE_GROUP})}

clicks = st.builds(
    lambda user, action, after_s, good_hash, serial, groups: Click(
        click_id=f"c{serial}",
        user=user,
        groups=GROUPS.get(user, frozenset()) if groups else frozenset({"S0OTHER"}),
        action=action,
        proposal_id=PROPOSAL.id,
        change_hash=PROPOSAL.change_hash if good_hash else "f" * 64,
        at=PROPOSAL.created_at + timedelta(seconds=after_s),
    ),
    user=st.sampled_from([ALICE, BOB, CAROL, MALLORY]),
    action=st.sampled_from(list(Action)),
    after_s=st.floats(0, TTL_S * 1.2),
    good_hash=st.booleans(),
    serial=st.integers(0, 5),  # few ids, so that replays happen
    groups=st.booleans(),
)
rechecks = st.builds(
    Recheck,
    condition_holds=st.sampled_from([True, True, False, None]),
    knobs=st.sampled_from([{"max_num_seqs": 256.0}, {"max_num_seqs": 255.0}, {}]),
    newer_proposal=st.sampled_from([None, None, "p9"]),
    freeze=st.sampled_from([None, None, "incident"]),
    veto=st.sampled_from([None, None, "gpu-throttling"]),
)


def _good(click: Click, recheck: Recheck) -> bool:
    return (
        click.action is Action.APPROVE
        and click.change_hash == PROPOSAL.change_hash
        and click.at < PROPOSAL.expires_at
        and RULES.admits(PROPOSAL.risk, click.user, click.groups)
        and recheck == FRESH
    )


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(clicks, rechecks), max_size=8), two_person=st.booleans())
def test_only_good_clicks_apply_and_only_once(
    steps: list[tuple[Click, Recheck]], two_person: bool
) -> None:
    rules: ApprovalRules = TWO_PERSON if two_person else RULES
    current = PENDING
    applied = 0
    approvers: list[str] = []
    seen: set[str] = set()
    for click, recheck in steps:
        outcome = decide(current, click, recheck, rules)
        if outcome.accepted and click.action is Action.APPROVE:
            assert _good(click, recheck)
            assert click.click_id not in seen
            assert click.user not in approvers
            approvers.append(click.user)
        if outcome.apply:
            applied += 1
            assert len(approvers) == rules.approvals_needed(PROPOSAL.risk)
            assert outcome.record.state is State.APPROVED
        if (
            rules.admits(PROPOSAL.risk, click.user, click.groups)
            and click.change_hash == PROPOSAL.change_hash
        ):
            seen.add(click.click_id)
        current = outcome.record
    assert applied <= 1
    assert (current.state is State.APPROVED) == (applied == 1)
