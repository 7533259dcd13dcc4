"""Why a policy fires or not, and what it would do: ``explain``'s answer. Pure.

    explain_policy(spec, states, views, now, wall) -> {"policy", "description", "targets"}

For each target the policy applies to: its condition and what it says now (``implausible`` when
a signal it reads has an implausible value, the reasons in ``implausible``: the policy then
treats it as no data and never acts on it), the value of each signal it reads, its phase and
for how long, and what the next evaluation would decide (the evaluation itself, run on a copy
of the state). A policy whose condition holds but not yet for its ``for`` says when it will
fire (``fires_in_s``), if the condition keeps holding; a firing policy whose exit condition
holds says when it will resolve (``resolves_in_s``).

The running daemon answers with its own states and signals; without a daemon, the CLI answers
with a fresh state on signals it collects itself (what a governor started now would decide).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from datetime import datetime
from typing import Any

from daemon.policy.evaluate import TargetView, condition_result, evaluate
from daemon.policy.spec import PolicySpec
from daemon.policy.state import Phase, PolicyState
from daemon.policy.tick import StateKey


def explain_policy(
    spec: PolicySpec,
    states: Mapping[StateKey, PolicyState],
    views: Mapping[str, TargetView],
    now: float,
    wall: datetime,
) -> dict[str, Any]:
    """``spec`` on every target it applies to; ``states`` may lack a target (inactive)."""
    targets = {}
    for target, view in views.items():
        if spec.applies_to(target):
            state = states.get((spec.name, target), PolicyState())
            targets[target] = _target(spec, state, view, now, wall)
    return {
        "policy": spec.name,
        "description": spec.description,
        # Whether firing makes it act (change, notify, veto, move a gate), or only records.
        "acts": spec.action is not None and not spec.shadow,
        "targets": targets,
    }


def _target(
    spec: PolicySpec, state: PolicyState, view: TargetView, now: float, wall: datetime
) -> dict[str, Any]:
    after, decisions = evaluate(spec, state, view, now, wall)
    result, error = condition_result(spec.when, view)
    implausible = {
        name: view.implausible[name] for name in sorted(spec.when.signals & view.implausible.keys())
    }
    return {
        "condition": spec.when.source,
        "result": result,
        "error": None if result == "implausible" else error,
        "implausible": implausible,
        "signals": {name: view.signals.get(name) for name in sorted(spec.when.signals)},
        "phase": state.phase.value,
        "held_for_s": None if state.since is None else round(now - state.since, 1),
        "for_s": spec.for_s,
        "would": [
            {
                "kind": decision.kind.value,
                "guard": decision.guard,
                "intent": asdict(decision.intent) if decision.intent else None,
            }
            for decision in decisions
        ],
        "next_phase": after.phase.value,
        "fires_in_s": _fires_in(spec, after, now),
        "resolves_in_s": _resolves_in(spec, after, now),
    }


def fires_at(spec: PolicySpec, state: PolicyState) -> float | None:
    """When (loop clock) a pending policy fires if its condition keeps holding; None if not pending.

    ``status`` shows it for each pending policy, as ``explain`` shows :func:`_fires_in`.
    """
    if state.phase is not Phase.PENDING or state.since is None:
        return None
    return state.since + spec.for_s


def _fires_in(spec: PolicySpec, after: PolicyState, now: float) -> float | None:
    """Seconds until a pending policy fires if its condition keeps holding; None if not pending."""
    at = fires_at(spec, after)
    return None if at is None else round(max(at - now, 0.0), 1)


def _resolves_in(spec: PolicySpec, after: PolicyState, now: float) -> float | None:
    """Seconds until a firing policy resolves if its exit condition keeps holding."""
    if after.phase is not Phase.FIRING or after.clearing_since is None:
        return None
    return round(max(spec.keep_firing_for_s - (now - after.clearing_since), 0.0), 1)
