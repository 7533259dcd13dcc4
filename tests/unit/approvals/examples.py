"""Shared examples for the approval tests: a kv-thrash proposal, rules, clicks and a clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from daemon.approvals.authorisation import AllowList, ApprovalRules
from daemon.approvals.clicks import Action, Click
from daemon.approvals.proposal import Proposal, RiskClass, from_decision
from daemon.approvals.records import ProposalRecord
from daemon.approvals.state_machine import Recheck
from daemon.policy.decisions import Decision, DecisionKind, Evidence, Intent

T0 = datetime(2026, 5, 4, 14, 30, tzinfo=UTC)
TTL_S = 30 * 60
CONDITION = "preemptions_per_s > 0.5 && ttft_p95_s > 2.0"

ALICE, BOB, CAROL, MALLORY = "U0ALICE", "U0BOB", "U0CAROL", "U0MALLORY"
SRE_GROUP = "S0SRE"

RULES = ApprovalRules(
    allow={
        RiskClass.RESTART: AllowList(users=frozenset({ALICE, BOB}), groups=frozenset({SRE_GROUP})),
        RiskClass.CHANGE: AllowList(users=frozenset({ALICE})),
    }
)
TWO_PERSON = ApprovalRules(allow=RULES.allow, two_person=frozenset({RiskClass.RESTART}))


def decision(
    *,
    old: float = 256.0,
    new: float = 192.0,
    target: str = "main",
    operation: str | None = None,
    risk: str = "approval",
    note: str = "KV cache thrashes and TTFT breaks the SLO",
) -> Decision:
    """The default pack's kv-thrash policy asking for fewer sequences."""
    changes, current = ({}, {}) if operation else ({"max_num_seqs": new}, {"max_num_seqs": old})
    return Decision(
        policy="kv-thrash",
        target=target,
        at=1234.5,
        kind=DecisionKind.INTENT,
        evidence=Evidence(CONDITION, {"preemptions_per_s": 0.82, "ttft_p95_s": 3.41}, 130.0, note),
        intent=Intent(changes, current, operation, risk),
    )


def proposal(**kwargs: object) -> Proposal:
    """The proposal of :func:`decision` (keyword arguments go to the decision)."""
    return from_decision(
        decision(**kwargs),  # type: ignore[arg-type]
        host="gpu-node-07",
        created_at=T0,
        ttl_s=TTL_S,
        restart_downtime_s=75,
    )


def record(**kwargs: object) -> ProposalRecord:
    """A pending record of :func:`proposal`."""
    return ProposalRecord(proposal(**kwargs))


FRESH = Recheck(condition_holds=True, knobs={"max_num_seqs": 256.0})


def click(
    target: ProposalRecord,
    user: str = ALICE,
    action: Action = Action.APPROVE,
    *,
    after_s: float = 60.0,
    groups: frozenset[str] = frozenset(),
    hash_hex: str | None = None,
    proposal_id: str | None = None,
    click_id: str | None = None,
) -> Click:
    """A click on ``target``'s button, ``after_s`` seconds after it was proposed."""
    p = target.proposal
    return Click(
        click_id=click_id or f"slack:{user}:{action.value}:{after_s}",
        user=user,
        groups=groups,
        action=action,
        proposal_id=proposal_id or p.id,
        change_hash=hash_hex or p.change_hash,
        at=p.created_at + timedelta(seconds=after_s),
    )


@dataclass
class FakeClock:
    """A clock the test sets: ``wall`` is ``now``; ``monotonic`` follows it."""

    now: datetime = field(default_factory=lambda: T0)

    def wall(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        return self.now.timestamp()
