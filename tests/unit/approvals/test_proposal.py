"""Proposals: what they copy from a decision, and the hash a click is bound to."""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from daemon.approvals.errors import ProposalError
from daemon.approvals.proposal import (
    KnobMove,
    Proposal,
    RiskClass,
    canonical_change,
    change_hash,
    from_decision,
)
from daemon.policy.decisions import DecisionKind, Intent
from tests.unit.approvals.examples import CONDITION, T0, TTL_S, decision, proposal

CANONICAL = '{"instance":"main","knobs":{"max_num_seqs":[256.0,192.0]},"operation":null}'
# Pinned: changing the canonical form would orphan every button already posted.
PINNED_HASH = "9cfe006bacb3faa1df4d39919ad8b77b5eed5fff7bf16e0369c867900b7b2d6a"


def test_a_proposal_copies_the_change_and_its_evidence() -> None:
    made = proposal()
    assert made.policy == "kv-thrash"
    assert (made.instance, made.host) == ("main", "gpu-node-07")
    assert made.moves == (KnobMove("max_num_seqs", 256.0, 192.0),)
    assert made.operation is None
    assert made.risk is RiskClass.RESTART  # every knob of vLLM 0.33 restarts it
    assert made.why.condition == CONDITION
    assert made.why.signals == (("preemptions_per_s", 0.82), ("ttft_p95_s", 3.41))
    assert made.why.held_for_s == 130.0
    assert made.effect == "Most sequences in one batch lowered from 256 to 192"
    assert made.cost == "restarts vLLM: ~1 min 15 s of lost capacity"
    assert made.expires_at - made.created_at == timedelta(seconds=TTL_S)
    assert made.summary() == "max_num_seqs 256 → 192"
    assert made.id.startswith("p")
    assert len(made.id) == 10


def test_the_change_hash_is_pinned() -> None:
    made = proposal()
    assert canonical_change(made.instance, made.moves, made.operation) == CANONICAL
    assert made.change_hash == hashlib.sha256(CANONICAL.encode()).hexdigest() == PINNED_HASH


@pytest.mark.parametrize(
    ("name", "other", "same"),
    [
        ("int and float values", proposal(old=256, new=192), True),
        ("another reason", proposal(note="something else entirely"), True),
        ("another policy", replace(proposal(), policy="other"), True),
        ("another time", replace(proposal(), created_at=T0 + timedelta(hours=1)), True),
        ("another old value", proposal(old=255.0), False),
        ("another new value", proposal(new=191.0), False),
        ("another instance", proposal(target="batch"), False),
        ("an operation", proposal(operation="restart"), False),
    ],
)
def test_the_hash_covers_the_change_and_nothing_else(
    name: str, other: Proposal, same: bool
) -> None:
    assert (other.change_hash == proposal().change_hash) is same, name


def test_the_same_change_proposed_later_gets_another_id() -> None:
    later = from_decision(decision(), host="h", created_at=T0 + timedelta(hours=1), ttl_s=60)
    assert later.change_hash == proposal().change_hash
    assert later.id != proposal().id


def test_an_operation_is_a_restart_with_no_knobs() -> None:
    made = proposal(operation="restart")
    assert (made.moves, made.operation, made.risk) == ((), "restart", RiskClass.RESTART)
    assert made.summary() == "restart"
    assert made.effect == "runs `restart` on the instance"


def test_an_unknown_knob_counts_as_a_restart() -> None:
    moves = (KnobMove("some_future_knob", 1.0, 2.0),)
    made = from_decision(
        replace(
            decision(),
            intent=Intent({"some_future_knob": 2.0}, {"some_future_knob": 1.0}, None, "approval"),
        ),
        host="h",
        created_at=T0,
        ttl_s=60,
    )
    assert made.moves == moves
    assert made.risk is RiskClass.RESTART
    assert made.change_hash == change_hash("main", moves, None)


@pytest.mark.parametrize(
    ("name", "bad", "created_at", "ttl_s"),
    [
        ("not an intent", replace(decision(), kind=DecisionKind.FIRED), T0, 60.0),
        ("no intent", replace(decision(), intent=None), T0, 60.0),
        ("automatic risk", decision(risk="auto"), T0, 60.0),
        ("a naive time", decision(), datetime(2026, 5, 4, 14, 30), 60.0),
        ("no lifetime", decision(), T0, 0.0),
        (
            "nothing to change",
            replace(decision(), intent=Intent({}, {}, None, "approval")),
            T0,
            60.0,
        ),
        (
            "an unknown current value",
            replace(decision(), intent=Intent({"max_num_seqs": 1.0}, {}, None, "approval")),
            T0,
            60.0,
        ),
        ("a value that is not finite", decision(new=math.nan), T0, 60.0),
    ],
)
def test_only_an_approval_risk_intent_becomes_a_proposal(
    name: str, bad: object, created_at: datetime, ttl_s: float
) -> None:
    with pytest.raises(ProposalError):
        from_decision(bad, host="h", created_at=created_at, ttl_s=ttl_s)  # type: ignore[arg-type]
