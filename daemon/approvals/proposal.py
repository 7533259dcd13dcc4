"""A proposal: one risky change, frozen as it was shown to people, and bound to its hash.

A proposal is made from a decision the planner accepted for a policy whose risk is
``approval``. Everything a person needs to judge it is copied in (the values read, the
condition, the expected effect and cost), so that the message, the CLI and the audit log show
the same thing even after the world moved on.

The :attr:`Proposal.change_hash` covers exactly what would be done: the instance, each knob
with its old and new value, and the operation. A button carries it, and a click whose hash
differs is refused, so a click can never approve something other than what its message showed.
The reason, the times and the wording are deliberately outside the hash: they explain the
change, they are not the change.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

from daemon.approvals.errors import ProposalError
from daemon.approvals.forecast import Forecast
from daemon.approvals.wording import format_duration, format_value
from daemon.core.knobs import KNOBS
from daemon.policy.decisions import Decision, DecisionKind

RESTART = "restart"
DEFAULT_RESTART_DOWNTIME_S = 60.0


class RiskClass(Enum):
    """What kind of risk a change carries; allow-lists and the two-person rule are per class."""

    CHANGE = "change"  # knob values applied without restarting vLLM
    RESTART = "restart"  # anything that restarts vLLM (every knob of vLLM 0.33, or `restart`)


@dataclass(frozen=True, slots=True)
class KnobMove:
    """One knob's value when the policy decided, and the value proposed."""

    knob: str
    old: float
    new: float


@dataclass(frozen=True, slots=True)
class Why:
    """The evidence, copied from the decision.

    Attributes:
        condition: The policy's condition as written (it holds the thresholds).
        signals: Each signal read and its value (None: no fresh data), sorted by name.
        held_for_s: How long the condition had held, when known.
        note: A sentence for people, possibly empty.
    """

    condition: str
    signals: tuple[tuple[str, float | bool | str | None], ...]
    held_for_s: float | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Proposal:
    """One change waiting for a person; immutable (its fate lives in the state machine).

    Attributes:
        id: Short and unique: what ``vllm-governor approve ID`` takes and a button carries.
        policy: The policy that wants the change.
        instance: The vLLM instance (a target of the policy).
        host: The machine it runs on, as people know it.
        moves: The knobs to change, sorted by knob name; empty for an operation.
        operation: A named operation (``restart``) instead of knob values, or None.
        risk: The risk class, which decides who may approve.
        why: The evidence.
        effect: What the change is expected to do, for people.
        cost: What it costs (a restart: the expected downtime), for people.
        created_at: When it was proposed (wall clock, timezone-aware).
        expires_at: After this, no click can decide it.
        forecast: What a tune policy's what-if predicted for it (None for other policies).
    """

    id: str
    policy: str
    instance: str
    host: str
    moves: tuple[KnobMove, ...]
    operation: str | None
    risk: RiskClass
    why: Why
    effect: str
    cost: str
    created_at: datetime
    expires_at: datetime
    forecast: Forecast | None = None

    @property
    def change_hash(self) -> str:
        """The sha256 (hex) of the canonical change; what a click is bound to."""
        return change_hash(self.instance, self.moves, self.operation)

    @property
    def restarts(self) -> bool:
        """Whether applying it restarts vLLM."""
        return self.risk is RiskClass.RESTART

    def summary(self) -> str:
        """The change in one line: ``max_num_seqs 256 → 192`` or ``restart``."""
        if self.operation is not None:
            return self.operation
        return ", ".join(
            f"{m.knob} {format_value(m.knob, m.old)} → {format_value(m.knob, m.new)}"
            for m in self.moves
        )


def canonical_change(instance: str, moves: tuple[KnobMove, ...], operation: str | None) -> str:
    """The change as canonical JSON: sorted keys, no spaces, floats in their shortest form.

    Values go through ``float`` first so that an int 256 and a float 256.0 (the policy core
    computes in floats) hash alike.
    """
    change = {
        "instance": instance,
        "knobs": {m.knob: [float(m.old), float(m.new)] for m in moves},
        "operation": operation,
    }
    return json.dumps(change, sort_keys=True, separators=(",", ":"), allow_nan=False)


def change_hash(instance: str, moves: tuple[KnobMove, ...], operation: str | None) -> str:
    """The sha256 (hex) of :func:`canonical_change`."""
    canonical = canonical_change(instance, moves, operation)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def proposal_id(hash_hex: str, created_at: datetime) -> str:
    """A short id: the same change proposed at another time gets another id."""
    seed = f"{hash_hex}@{created_at.isoformat()}".encode()
    return "p" + hashlib.sha256(seed).hexdigest()[:9]


def from_decision(
    decision: Decision,
    *,
    host: str,
    created_at: datetime,
    ttl_s: float,
    restart_downtime_s: float = DEFAULT_RESTART_DOWNTIME_S,
    effect: str = "",
) -> Proposal:
    """The proposal for an intent the planner accepted, for a policy with risk ``approval``.

    Args:
        decision: The accepted decision (its intent holds the final values).
        host: The machine of the target instance.
        created_at: Now, on the wall clock (timezone-aware).
        ttl_s: How long people have to decide.
        restart_downtime_s: The expected time vLLM is down for a restart, shown as the cost.
        effect: What the change is expected to do; derived from the knobs when empty.

    Raises:
        ProposalError: The decision is not an approval-risk intent, or its values are unusable.
    """
    intent = decision.intent
    if decision.kind is not DecisionKind.INTENT or intent is None:
        message = f"{decision.policy} on {decision.target}: only an intent can be proposed"
        raise ProposalError(message)
    if intent.risk != "approval":
        message = f"{decision.policy} on {decision.target}: risk {intent.risk} needs no approval"
        raise ProposalError(message)
    if created_at.tzinfo is None or ttl_s <= 0:
        message = "a proposal needs a timezone-aware creation time and a positive lifetime"
        raise ProposalError(message)
    moves = _moves(decision)
    if not moves and intent.operation is None:
        message = f"{decision.policy} on {decision.target}: the intent changes nothing"
        raise ProposalError(message)
    risk = _risk(moves, intent.operation)
    hash_hex = change_hash(decision.target, moves, intent.operation)
    # A tuned change carries its prediction: the effect and the cost are the what-if's.
    whatif = decision.details.get("whatif")
    forecast = None if whatif is None else Forecast.from_json(whatif)
    return Proposal(
        id=proposal_id(hash_hex, created_at),
        policy=decision.policy,
        instance=decision.target,
        host=host,
        moves=moves,
        operation=intent.operation,
        risk=risk,
        why=_why(decision),
        effect=effect or (forecast.effect_text() if forecast else _effect(moves, intent.operation)),
        cost=forecast.cost_text() if forecast else _cost(risk, restart_downtime_s),
        created_at=created_at,
        expires_at=created_at + timedelta(seconds=ttl_s),
        forecast=forecast,
    )


def _moves(decision: Decision) -> tuple[KnobMove, ...]:
    assert decision.intent is not None
    intent = decision.intent
    moves = []
    for knob in sorted(intent.changes):
        if knob not in intent.current:
            message = f"{decision.policy} on {decision.target}: the current {knob} is not known"
            raise ProposalError(message)
        old, new = float(intent.current[knob]), float(intent.changes[knob])
        if not (math.isfinite(old) and math.isfinite(new)):
            message = f"{decision.policy} on {decision.target}: {knob} {old} → {new} is not finite"
            raise ProposalError(message)
        moves.append(KnobMove(knob, old, new))
    return tuple(moves)


def _risk(moves: tuple[KnobMove, ...], operation: str | None) -> RiskClass:
    # A knob the table does not know is treated as restarting: the stricter class is the safe
    # guess when the governor cannot tell.
    restarts = operation == RESTART or any(
        m.knob not in KNOBS or KNOBS[m.knob].restart_required for m in moves
    )
    return RiskClass.RESTART if restarts else RiskClass.CHANGE


def _why(decision: Decision) -> Why:
    evidence = decision.evidence
    signals = tuple(
        (name, _evidence_value(value)) for name, value in sorted(evidence.signals.items())
    )
    return Why(evidence.condition, signals, evidence.held_for_s, evidence.note)


def _evidence_value(value: object) -> float | bool | str | None:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        return float(value)
    return str(value)


def _effect(moves: tuple[KnobMove, ...], operation: str | None) -> str:
    if operation is not None:
        return f"runs `{operation}` on the instance"
    parts = []
    for move in moves:
        meaning = KNOBS[move.knob].meaning if move.knob in KNOBS else move.knob
        way = "lowered" if move.new < move.old else "raised"
        old, new = format_value(move.knob, move.old), format_value(move.knob, move.new)
        parts.append(f"{meaning} {way} from {old} to {new}")
    return "; ".join(parts)


def _cost(risk: RiskClass, restart_downtime_s: float) -> str:
    if risk is RiskClass.RESTART:
        return f"restarts vLLM: ~{format_duration(restart_downtime_s)} of lost capacity"
    return "applied without a restart"
