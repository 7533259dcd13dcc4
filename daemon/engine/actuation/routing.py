"""Routing: where each accepted intent goes. Pure.

Each target is owned by the first actuator kind of the table whose section holds it
(:class:`Owner`); what the kind declares decides the rest:

* A policy quarantined on that server (its last change had to be reverted) is blocked
  (``quarantined``) until people lift the quarantine.
* A target no kind owns (a ``[[vllm]]`` server without ``config_path``, or a kind missing
  from the table) blocks the intent (``not_actuated``): it is observed only.
* A kind that takes only some knobs (a live log-level target takes ``log_level``) blocks any
  other knob, and any operation it does not run (``not_actuated``), whatever the policy says.
  An operation (``restart``: no config change) goes to a kind that runs it, through its
  actuator's preflight (its restart envelope, freezes, one in flight).
* Risk ``approval`` on a live kind is blocked (``not_actuated``): a live change is undone as
  easily as it is made, approvals are for restarts. On a restart-required kind: a proposal
  for the approvals plane (:mod:`daemon.engine.approvals.approvals_plane`), kept until a
  person decides; once approved it comes back on the same path as ``auto``.
* Risk ``auto``: to the kind's runner. The target's ``mode`` (active or dry-run) and every
  envelope are checked again there, on the path that changes it.

Shadow policies never get here: evaluation records what they would have done instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from daemon.approvals.forecast import Forecast
from daemon.core.actuation import ChangeRequest
from daemon.core.actuator_kinds import ActuatorKind, Target
from daemon.policy.decisions import Decision, DecisionKind


@dataclass(frozen=True, slots=True)
class Owner:
    """The kind of actuator that changes a target, and the target as its settings say."""

    kind: ActuatorKind[Any]
    target: Target


@dataclass(frozen=True, slots=True)
class Routing:
    """Where the intents of one tick go."""

    auto: list[tuple[Owner, ChangeRequest]] = field(default_factory=list)
    proposals: list[ChangeRequest] = field(default_factory=list)
    blocked: list[Decision] = field(default_factory=list)


def route(
    accepted: Sequence[Decision],
    owners: Mapping[str, Owner],
    quarantined: Mapping[tuple[str, str], str],
) -> Routing:
    """Sort accepted intents into changes, proposals and blocks.

    ``owners`` are the targets an actuator of the table changes, by name.
    """
    routing = Routing()
    for decision in accepted:
        assert decision.intent is not None
        owner = owners.get(decision.target)
        why = quarantined.get((decision.policy, decision.target))
        if why is not None:
            routing.blocked.append(_blocked(decision, "quarantined", f"quarantined: {why}"))
        elif owner is None:
            reason = f"{decision.target} has no config_path in config.toml: observed only"
            routing.blocked.append(_blocked(decision, "not_actuated", reason))
        elif refusal := _not_taken(decision, owner.kind):
            routing.blocked.append(_blocked(decision, "not_actuated", refusal))
        elif decision.intent.risk == "approval":
            routing.proposals.append(request_of(decision))
        else:
            routing.auto.append((owner, request_of(decision)))
    return routing


def _not_taken(decision: Decision, kind: ActuatorKind[Any]) -> str:
    """Why ``kind`` does not take this intent as it stands; "" when it does."""
    intent = decision.intent
    assert intent is not None
    operation = intent.operation
    unknown_operation = operation is not None and operation not in kind.operations
    if kind.knobs is not None:
        others = sorted(set(intent.changes) - kind.knobs)
        if others or unknown_operation:
            what = ", ".join(others) or f"operation {operation}"
            takes = ", ".join(sorted(kind.knobs))
            return f"{decision.target} is a {kind.title} target: it takes {takes} only, not {what}"
    elif unknown_operation:
        return f"operation {operation!r} is not run by the {kind.title} actuator"
    if intent.risk == "approval" and kind.capabilities.live:
        # A live change is undone as easily as it is done: approvals are for restarts. Saying
        # so beats a proposal that no approved-changes runner could carry out.
        return (
            f"{decision.target} is a {kind.title} target: its changes run with risk auto, "
            "approvals are not supported there"
        )
    return ""


def request_of(decision: Decision) -> ChangeRequest:
    """The change an accepted intent asks for, with its reason and evidence."""
    intent = decision.intent
    assert intent is not None
    evidence = decision.evidence
    held = "" if evidence.held_for_s is None else f" for {evidence.held_for_s:.0f} s"
    reason = f"{decision.policy}: {evidence.condition} held{held}"
    if evidence.note:
        reason = f"{reason} ({evidence.note})"
    return ChangeRequest(
        target=decision.target,
        policy=decision.policy,
        changes=dict(intent.changes),
        current=dict(intent.current),
        reason=reason,
        evidence=dict(evidence.signals),
        risk=intent.risk,
        operation=intent.operation,
        forecast=forecast_of(decision),
    )


def forecast_of(decision: Decision) -> dict[str, Any] | None:
    """A tuned intent's counterfactual as the journal keeps it (None for any other intent)."""
    whatif = decision.details.get("whatif")
    return None if whatif is None else Forecast.from_json(whatif).to_json()


def _blocked(decision: Decision, guard: str, reason: str) -> Decision:
    return replace(decision, kind=DecisionKind.BLOCKED, guard=guard, details={"reason": reason})
