"""Button values and the presses read from Slack payloads (built by the Slack double)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from daemon.approvals.blocks import message_blocks
from daemon.approvals.clicks import (
    Action,
    ButtonKind,
    Press,
    button_value,
    parse_button_value,
    read_press,
)
from daemon.approvals.records import State
from daemon.approvals.state_machine import decide
from tests.support.slack_double import Message, block_actions
from tests.unit.approvals.examples import ALICE, FRESH, RULES, T0, record

PENDING = record()
PROPOSAL = PENDING.proposal
MESSAGE = Message("C0OPS", "1700000000.000001", "approval needed", message_blocks(PENDING))


def _payload(action_id: str = "approval.approve", **overrides: Any) -> dict[str, Any]:
    payload = block_actions(MESSAGE, ALICE, action_id, action_ts="1700001000.000001")
    payload.update(overrides)
    return payload


def test_button_values_round_trip() -> None:
    value = button_value(PROPOSAL.id, PROPOSAL.change_hash)
    assert parse_button_value(value) == (PROPOSAL.id, PROPOSAL.change_hash)


@pytest.mark.parametrize(
    "value",
    [
        "",
        PROPOSAL.id,
        f"{PROPOSAL.id}:{PROPOSAL.change_hash[:-1]}",
        f"{PROPOSAL.id}:{PROPOSAL.change_hash.upper()}",
        f"{PROPOSAL.id}:{PROPOSAL.change_hash}:extra",
        f"p 1:{PROPOSAL.change_hash}",
        f"{'p' * 65}:{PROPOSAL.change_hash}",
    ],
)
def test_malformed_button_values_are_not_read(value: str) -> None:
    assert parse_button_value(value) is None


def test_a_press_on_the_rendered_message_approves_it() -> None:
    press = read_press(_payload())
    assert press == Press(
        ButtonKind.APPROVE,
        ALICE,
        PROPOSAL.id,
        PROPOSAL.change_hash,
        "1700001000.000001",
        "C0OPS",
        "1700000000.000001",
    )
    click = press.click(frozenset(), T0)
    assert click.click_id == "slack:U0ALICE:approve:1700001000.000001"
    assert click.action is Action.APPROVE
    outcome = decide(PENDING, click, FRESH, RULES)
    assert (outcome.record.state, outcome.apply) == (State.APPROVED, True)


def test_reject_and_details_presses() -> None:
    reject = read_press(_payload("approval.reject"))
    details = read_press(_payload("approval.details"))
    assert reject is not None
    assert details is not None
    assert reject.click(frozenset(), T0).action is Action.REJECT
    assert details.kind is ButtonKind.DETAILS
    with pytest.raises(ValueError, match="decides nothing"):
        details.click(frozenset(), T0)


def test_a_tampered_value_is_read_but_then_refused_for_its_hash() -> None:
    other = replace(PROPOSAL, moves=(replace(PROPOSAL.moves[0], new=1.0),))
    payload = block_actions(
        MESSAGE,
        ALICE,
        "approval.approve",
        action_ts="1.1",
        value=button_value(PROPOSAL.id, other.change_hash),
    )
    press = read_press(payload)
    assert press is not None
    outcome = decide(PENDING, press.click(frozenset(), T0), FRESH, RULES)
    assert outcome.refusal is not None
    assert outcome.refusal.value == "wrong_hash"


@pytest.mark.parametrize(
    ("name", "payload"),
    [
        ("another kind of payload", _payload(type="view_submission")),
        ("no user", _payload(user={})),
        ("no container", _payload(container=None)),
        ("two actions", _payload(actions=[_payload()["actions"][0]] * 2)),
        (
            "another app's button",
            _payload(actions=[{**_payload()["actions"][0], "action_id": "x.approve"}]),
        ),
        (
            "an unknown button",
            _payload(actions=[{**_payload()["actions"][0], "action_id": "approval.nuke"}]),
        ),
        ("a bad value", _payload(actions=[{**_payload()["actions"][0], "value": "p1:zz"}])),
        ("no action_ts", _payload(actions=[{**_payload()["actions"][0], "action_ts": None}])),
        ("an action that is not an object", _payload(actions=["approval.approve"])),
    ],
)
def test_unreadable_payloads_give_no_press(name: str, payload: dict[str, Any]) -> None:
    assert read_press(payload) is None, name
