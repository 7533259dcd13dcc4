"""The Block Kit message: valid for Slack, bound to the change, snapshotted in the docs."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from daemon.approvals.blocks import (
    FIELD_LIMIT,
    HEADER_LIMIT,
    TEXT_LIMIT,
    details_blocks,
    fallback_text,
    message_blocks,
    thread_text,
)
from daemon.approvals.clicks import Action, parse_button_value
from daemon.approvals.proposal import KnobMove, Why
from daemon.approvals.records import ProposalRecord, State, Vote, move
from tests.unit.approvals.examples import ALICE, BOB, T0, record
from tests.unit.approvals.rendering import (
    DECIDED_JSON,
    PROPOSAL_JSON,
    decided_example,
    message_json,
    pending_example,
)

PENDING = record()
UPDATE = os.environ.get("VLLM_GOVERNOR_UPDATE_DOCS") == "1"


def _valid(blocks: list[dict[str, Any]]) -> None:
    """Valid as slack-sdk's models check it (lengths, counts), and nothing dropped in parsing."""
    assert len(blocks) <= 50
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None
        parsed.validate_json()
        assert parsed.to_dict() == block


def _texts(value: object) -> list[str]:
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return [value["text"], *(t for k, v in value.items() if k != "text" for t in _texts(v))]
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def _in_state(state: State) -> ProposalRecord:
    at = T0 + timedelta(minutes=2)
    vote = Vote(ALICE, Action.APPROVE, at, "slack")
    path = {
        State.PENDING: [],
        State.APPROVED: [State.APPROVED],
        State.APPLIED: [State.APPROVED, State.APPLIED],
        State.VERIFIED: [State.APPROVED, State.APPLIED, State.VERIFIED],
        State.REVERTED: [State.APPROVED, State.APPLIED, State.REVERTED],
        State.FAILED: [State.APPROVED, State.FAILED],
        State.ROLLING_OUT: [State.APPROVED, State.ROLLING_OUT],
        State.ROLLED_OUT: [State.APPROVED, State.ROLLING_OUT, State.ROLLED_OUT],
        State.ROLLED_BACK: [State.APPROVED, State.ROLLING_OUT, State.ROLLED_BACK],
        State.ABORTED: [State.APPROVED, State.ABORTED],
    }.get(state, [state])
    current = PENDING
    for step in path:
        current = move(current, step, at, f"because {step.value}")
    return replace(current, decided_by=vote if path else None)


@pytest.mark.parametrize("state", list(State), ids=[s.value for s in State])
def test_every_state_renders_valid_block_kit(state: State) -> None:
    target = _in_state(state)
    blocks = message_blocks(target, approvals_needed=2)
    _valid(blocks)
    actions = [b for b in blocks if b["type"] == "actions"]
    assert bool(actions) is (state is State.PENDING)  # decided messages cannot be clicked
    assert fallback_text(target)
    assert thread_text(target)
    if state is not State.PENDING:
        outcome = next(b for b in blocks if "*Outcome:*" in b.get("text", {}).get("text", ""))
        text = outcome["text"]["text"]
        assert state.value.replace("_", " ") in text
        assert "<@U0ALICE>" in text
        assert f"because {state.value}" in text


def test_buttons_carry_the_proposal_and_its_hash() -> None:
    [actions] = [b for b in message_blocks(PENDING) if b["type"] == "actions"]
    approve, reject, details = actions["elements"]
    assert [e["action_id"] for e in actions["elements"]] == [
        "approval.approve",
        "approval.reject",
        "approval.details",
    ]
    assert approve["style"] == "primary"
    assert approve["confirm"]["title"]["text"] == "Approve this change?"
    assert "restarts vLLM" in approve["confirm"]["text"]["text"]
    assert reject["style"] == "danger"
    assert "style" not in details
    for element in actions["elements"]:
        assert parse_button_value(element["value"]) == (
            PENDING.proposal.id,
            PENDING.proposal.change_hash,
        )


def test_the_message_shows_the_facts_people_decide_on() -> None:
    text = "\n".join(_texts(message_blocks(PENDING)))
    for needed in [
        "gpu-node-07",
        "`main`",
        "`max_num_seqs`",
        "256 → *192*",
        "`preemptions_per_s` = *0.82* (threshold > 0.5)",
        "`ttft_p95_s` = *3.41* (threshold > 2.0)",
        "held for 2 min 10 s",
        "restarts vLLM: ~1 min 15 s of lost capacity",
        "<!date^1777906800^{date_short_pretty} {time}|2026-05-04 15:00 UTC>",
    ]:
        assert needed in text


def test_two_person_progress_is_shown_while_pending() -> None:
    first = replace(PENDING, approvals=(Vote(ALICE, Action.APPROVE, T0, "slack"),))
    text = "\n".join(_texts(message_blocks(first, approvals_needed=2)))
    assert "needs 2 approvers (so far: <@U0ALICE>)" in text
    done = replace(
        move(first, State.APPROVED, T0),
        approvals=(*first.approvals, Vote(BOB, Action.APPROVE, T0, "slack")),
        decided_by=Vote(BOB, Action.APPROVE, T0, "slack"),
    )
    assert "*Approvals* <@U0ALICE> (approve)" in "\n".join(_texts(message_blocks(done)))


def test_cli_approvers_are_named_not_mentioned() -> None:
    decided = replace(
        move(PENDING, State.REJECTED, T0), decided_by=Vote("unix:alice", Action.REJECT, T0, "cli")
    )
    assert "alice (CLI) (reject)" in "\n".join(_texts(message_blocks(decided)))


def test_long_evidence_is_clipped_to_the_limits() -> None:
    huge = replace(
        PENDING.proposal,
        host="h" * 3000,
        moves=tuple(KnobMove(f"knob_{n:03d}_" + "x" * 40, n, n + 1) for n in range(60)),
        why=Why(
            "x > 1 && " * 500,
            tuple((f"signal_{n}", float(n)) for n in range(400)),
            1e6,
            "n" * 5000,
        ),
        effect="e" * 5000,
        cost="c" * 5000,
    )
    target = ProposalRecord(huge)
    for blocks in (message_blocks(target), details_blocks(huge)):
        _valid(blocks)
        texts = _texts(blocks)
        assert max(map(len, texts)) <= TEXT_LIMIT
    header = message_blocks(target)[0]["text"]["text"]
    assert len(header) == HEADER_LIMIT
    assert header.endswith("…")
    fields = message_blocks(target)[1]["fields"]
    assert all(len(f["text"]) <= FIELD_LIMIT for f in fields)
    assert len(fallback_text(target)) <= TEXT_LIMIT


def test_details_show_the_full_hash_and_every_signal() -> None:
    blocks = details_blocks(PENDING.proposal)
    _valid(blocks)
    text = "\n".join(_texts(blocks))
    assert PENDING.proposal.change_hash in text
    assert "`ttft_p95_s` = 3.41" in text


@pytest.mark.parametrize(
    ("path", "example"),
    [(PROPOSAL_JSON, pending_example), (DECIDED_JSON, decided_example)],
    ids=["proposal", "decided"],
)
def test_the_documented_messages_are_current(path: Any, example: Any) -> None:
    rendered = message_json(example())
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rendered, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == rendered, (
        f"{path} is out of date: rerun with VLLM_GOVERNOR_UPDATE_DOCS=1 and review the diff"
    )
