"""The gate: where each accepted intent goes. Pure.

* A policy quarantined on that server (its last change had to be reverted) is blocked
  (``quarantined``) until people lift the quarantine.
* A server the governor cannot change (no ``config_path``, or no actuator) blocks the intent
  (``not_actuated``); so does an operation (``restart``), which this actuator does not run yet.
* Risk ``approval``: a proposal, kept until a person decides (approvals are their own issue).
* Risk ``auto``: to the actuation runner. The instance's ``mode`` (active or dry-run) and
  every envelope are checked again there, on the path that changes the server.

Shadow policies never get here: evaluation records what they would have done instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from daemon.core.actuation import ChangeRequest
from daemon.core.settings import VllmInstance
from daemon.policy.decisions import Decision, DecisionKind


@dataclass(frozen=True, slots=True)
class Routing:
    """Where the intents of one tick go."""

    auto: list[tuple[VllmInstance, ChangeRequest]] = field(default_factory=list)
    proposals: list[ChangeRequest] = field(default_factory=list)
    blocked: list[Decision] = field(default_factory=list)


def route(
    accepted: Sequence[Decision],
    instances: Mapping[str, VllmInstance],
    quarantined: Mapping[tuple[str, str], str],
    *,
    actuated: bool,
) -> Routing:
    """Sort accepted intents into changes, proposals and blocks."""
    routing = Routing()
    for decision in accepted:
        intent = decision.intent
        assert intent is not None
        instance = instances.get(decision.target)
        why = quarantined.get((decision.policy, decision.target))
        if why is not None:
            routing.blocked.append(_blocked(decision, "quarantined", f"quarantined: {why}"))
        elif intent.operation is not None:
            reason = f"operation {intent.operation!r} is not run by the vLLM actuator yet"
            routing.blocked.append(_blocked(decision, "not_actuated", reason))
        elif instance is None or instance.config_path is None or not actuated:
            reason = f"{decision.target} has no config_path in config.toml: observed only"
            routing.blocked.append(_blocked(decision, "not_actuated", reason))
        elif intent.risk == "approval":
            routing.proposals.append(request_of(decision))
        else:
            routing.auto.append((instance, request_of(decision)))
    return routing


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
    )


def _blocked(decision: Decision, guard: str, reason: str) -> Decision:
    return replace(decision, kind=DecisionKind.BLOCKED, guard=guard, details={"reason": reason})
