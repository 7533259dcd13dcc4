"""Routing: where each accepted intent goes. Pure.

* A policy quarantined on that server (its last change had to be reverted) is blocked
  (``quarantined``) until people lift the quarantine.
* A server the governor cannot change (no ``config_path``, or no actuator) blocks the intent
  (``not_actuated``). An operation (``restart``: no config change) goes the same way as a
  change, through the actuator's preflight (its restart envelope, freezes, one in flight).
* A live log-level target (``[[http_log_level]]``) takes ``log_level`` alone, with risk
  ``auto``; any other knob, an operation or risk ``approval`` is blocked (``not_actuated``),
  whatever the policy says.
* Risk ``approval``: a proposal for the approvals plane
  (:mod:`daemon.engine.approvals.approvals_plane`),
  kept until a person decides; once approved it comes back on the same path as ``auto``.
* Risk ``auto``: to the actuation runner. The instance's ``mode`` (active or dry-run) and
  every envelope are checked again there, on the path that changes the server.

Shadow policies never get here: evaluation records what they would have done instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from daemon.core.actuation import ChangeRequest
from daemon.core.http_log_level_settings import LOG_LEVEL_KNOB, HttpLogLevelTarget
from daemon.core.settings import VllmInstance
from daemon.policy.decisions import Decision, DecisionKind

# What an intent may ask of the vLLM actuator besides knob values (None: knob values only).
OPERATIONS = (None, "restart")


@dataclass(frozen=True, slots=True)
class Routing:
    """Where the intents of one tick go."""

    auto: list[tuple[VllmInstance, ChangeRequest]] = field(default_factory=list)
    proposals: list[ChangeRequest] = field(default_factory=list)
    blocked: list[Decision] = field(default_factory=list)
    live: list[tuple[HttpLogLevelTarget, ChangeRequest]] = field(default_factory=list)


def route(
    accepted: Sequence[Decision],
    instances: Mapping[str, VllmInstance],
    quarantined: Mapping[tuple[str, str], str],
    *,
    actuated: bool,
    live: Mapping[str, HttpLogLevelTarget] | None = None,
) -> Routing:
    """Sort accepted intents into changes, proposals and blocks.

    ``live`` are the log-level targets (``[[http_log_level]]``) with an actuator for them.
    """
    routing = Routing()
    live = live or {}
    for decision in accepted:
        intent = decision.intent
        assert intent is not None
        instance = instances.get(decision.target)
        why = quarantined.get((decision.policy, decision.target))
        if why is not None:
            routing.blocked.append(_blocked(decision, "quarantined", f"quarantined: {why}"))
        elif decision.target in live:
            _route_live(decision, live[decision.target], routing)
        elif intent.operation not in OPERATIONS:
            reason = f"operation {intent.operation!r} is not run by the vLLM actuator"
            routing.blocked.append(_blocked(decision, "not_actuated", reason))
        elif instance is None or instance.config_path is None or not actuated:
            reason = f"{decision.target} has no config_path in config.toml: observed only"
            routing.blocked.append(_blocked(decision, "not_actuated", reason))
        elif intent.risk == "approval":
            routing.proposals.append(request_of(decision))
        else:
            routing.auto.append((instance, request_of(decision)))
    return routing


def _route_live(decision: Decision, target: HttpLogLevelTarget, routing: Routing) -> None:
    """A live target takes ``log_level`` alone: a vLLM knob or an operation never goes there."""
    intent = decision.intent
    assert intent is not None
    others = sorted(set(intent.changes) - {LOG_LEVEL_KNOB})
    if others or intent.operation is not None:
        what = ", ".join(others) or f"operation {intent.operation}"
        reason = f"{target.name} is a live log-level target: it takes log_level only, not {what}"
        routing.blocked.append(_blocked(decision, "not_actuated", reason))
    elif intent.risk == "approval":
        # A live level is undone as easily as it is done: approvals are for restarts. Saying
        # so beats a proposal that no approved-changes runner could carry out.
        reason = (
            f"{target.name} is a live log-level target: its changes run with risk auto, "
            "approvals are not supported there"
        )
        routing.blocked.append(_blocked(decision, "not_actuated", reason))
    else:
        routing.live.append((target, request_of(decision)))


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
    )


def _blocked(decision: Decision, guard: str, reason: str) -> Decision:
    return replace(decision, kind=DecisionKind.BLOCKED, guard=guard, details={"reason": reason})
