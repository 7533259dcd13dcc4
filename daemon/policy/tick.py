"""One tick of the policy engine: every policy on every target, then the planner. Pure.

The engine's shell calls :func:`tick` on a timer with what the sources see, persists the new
states, records the decisions, and hands the accepted intents to the gate (auto-apply or
approval). It records a knob's change in its :class:`KnobHistory` when the change is applied,
not when it is proposed: a proposal waiting for a human does not start the dwell time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from daemon.core.settings import Envelope
from daemon.policy.decisions import Decision, DecisionKind
from daemon.policy.evaluate import TargetView, evaluate
from daemon.policy.planner import KnobHistory, KnobKey, plan
from daemon.policy.spec import PolicySpec
from daemon.policy.state import Phase, PolicyState

StateKey = tuple[str, str]  # (policy, target)


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one tick concluded."""

    states: dict[StateKey, PolicyState]
    decisions: tuple[Decision, ...]  # everything worth recording, in order
    accepted: tuple[Decision, ...]  # intents inside their envelopes, for the gate


def tick(
    specs: Sequence[PolicySpec],
    states: Mapping[StateKey, PolicyState],
    views: Mapping[str, TargetView],
    *,
    envelopes: Mapping[KnobKey, Envelope],
    history: Mapping[KnobKey, KnobHistory],
    now: float,
    wall: datetime,
) -> TickResult:
    """Evaluate every (policy, target) pair, then plan the intents."""
    new_states = dict(states)
    recorded: list[Decision] = []
    intents: list[Decision] = []
    for spec in specs:
        for target, view in views.items():
            if not spec.applies_to(target):
                continue
            key = (spec.name, target)
            state, decisions = evaluate(spec, states.get(key, PolicyState()), view, now, wall)
            new_states[key] = state
            for decision in decisions:
                (intents if decision.kind is DecisionKind.INTENT else recorded).append(decision)
    result = plan(intents, envelopes, history, now, vetoes_in_force(specs, new_states, views))
    for decision in result.accepted:
        key = (decision.policy, decision.target)
        new_states[key] = new_states[key].acted(now)
        recorded.append(decision)
    for decision in result.blocked:
        key = (decision.policy, decision.target)
        assert decision.guard is not None
        if new_states[key].blocked_by != decision.guard:
            recorded.append(decision)
        new_states[key] = new_states[key].blocked(decision.guard)
    return TickResult(new_states, tuple(recorded), result.accepted)


def vetoes_in_force(
    specs: Sequence[PolicySpec], states: Mapping[StateKey, PolicyState], targets: Iterable[str]
) -> dict[KnobKey, str]:
    """(target, knob) -> the firing veto policy that forbids moving it the unsafe way."""
    return {
        (target, knob): spec.name
        for spec in specs
        if spec.action is not None
        for knob in spec.action.vetoes
        for target in targets
        if states.get((spec.name, target), PolicyState()).phase is Phase.FIRING
    }
