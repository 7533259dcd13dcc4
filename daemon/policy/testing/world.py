"""The simulated world of a policy test: series in, the governor's decisions and actions out.

At each tick ``k`` (``now = k * interval``, wall clock ``start + now``):

1. Each target's view holds the series' values at ``k``; ``_`` and the end of a series are
   absent, which is how the engine sees stale data.
2. :func:`daemon.policy.tick.tick` evaluates every policy on every target and plans.
3. The simulated actuator acts on the accepted intents: risk ``auto`` is applied at once
   (``applied``: the knob takes its value, its history records the change); risk ``approval``
   becomes the pending proposal of that policy on that target (``proposed``; a newer one
   supersedes it).
4. The approvals of tick ``k`` are answered: ``approve`` applies the proposal, unless a knob no
   longer has the value the proposal assumed (``blocked`` with guard ``stale_proposal``);
   ``reject`` drops it. An answer with no proposal to answer is reported, not ignored.

Operations (a restart) change no knob here: the series say what the server does afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from daemon.policy.decisions import Decision, Evidence
from daemon.policy.evaluate import TargetView
from daemon.policy.knob_signals import with_knob_signals
from daemon.policy.planner import KnobHistory, KnobKey
from daemon.policy.state import Phase, PolicyState
from daemon.policy.testing.suites import Approval, Case, SignalValues, Suite
from daemon.policy.tick import StateKey, tick


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened at a tick: a decision, or what the actuator did with one."""

    tick: int
    kind: str
    policy: str
    target: str
    changes: Mapping[str, float] | None = None
    operation: str | None = None
    guard: str | None = None
    reason: str = ""
    evidence: Evidence | None = None
    firing_for_s: float | None = None  # a resolve: how long the policy had fired


@dataclass(frozen=True, slots=True)
class Outcome:
    """Everything a simulated run produced."""

    events: tuple[Event, ...]
    knobs: Mapping[str, Mapping[str, float]]  # target -> knob -> value at the end
    phases: Mapping[StateKey, Phase]
    unanswered: tuple[Approval, ...]  # approvals that found no pending proposal


@dataclass
class _World:
    suite: Suite
    case: Case
    knobs: dict[str, dict[str, float]]
    states: dict[StateKey, PolicyState] = field(default_factory=dict)
    history: dict[KnobKey, KnobHistory] = field(default_factory=dict)
    proposals: dict[StateKey, Decision] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    unanswered: list[Approval] = field(default_factory=list)


def simulate(suite: Suite, case: Case) -> Outcome:
    """Run ``case`` from tick 0 to its last tick; pure and deterministic."""
    knobs = {name: dict(setup.knobs) for name, setup in suite.targets.items()}
    world = _World(suite, case, knobs)
    envelopes = {
        (target, knob): envelope
        for target, setup in suite.targets.items()
        for knob, envelope in setup.envelopes.items()
    }
    approvals: dict[int, list[Approval]] = {}
    for approval in case.approvals:
        approvals.setdefault(approval.tick, []).append(approval)
    for index in range(case.last_tick + 1):
        now = index * suite.interval_s
        result = tick(
            suite.specs,
            world.states,
            {target: _view(world, target, index) for target in suite.targets},
            envelopes=envelopes,
            history=world.history,
            now=now,
            wall=suite.start + timedelta(seconds=now),
        )
        world.states = result.states
        world.events.extend(_event(index, decision) for decision in result.decisions)
        for decision in result.accepted:
            _actuate(world, index, decision)
        for approval in approvals.get(index, []):
            _answer(world, index, approval)
    phases = {key: state.phase for key, state in world.states.items()}
    return Outcome(tuple(world.events), world.knobs, phases, tuple(world.unanswered))


def _view(world: _World, target: str, index: int) -> TargetView:
    signals: dict[str, Any] = {}
    for name, values in world.case.series.get(target, {}).items():
        value = _value_at(values, index)
        if value is not None:
            signals[name] = value
    knobs = dict(world.knobs[target])
    return TargetView(target, with_knob_signals(signals, knobs), knobs)


def _value_at(values: SignalValues, index: int) -> float | dict[str, float] | None:
    if isinstance(values, dict):
        fresh = {key: _value_at(series, index) for key, series in values.items()}
        known = {key: value for key, value in fresh.items() if isinstance(value, float)}
        return known or None  # a map with no fresh key is no data at all
    return values[index] if index < len(values) else None


def _actuate(world: _World, index: int, decision: Decision) -> None:
    assert decision.intent is not None
    if decision.intent.risk == "auto":
        _apply(world, index, decision)
    else:
        world.proposals[(decision.policy, decision.target)] = decision
        world.events.append(_event(index, decision, kind="proposed"))


def _answer(world: _World, index: int, approval: Approval) -> None:
    keys = [
        key
        for key in world.proposals
        if key[0] == approval.policy and approval.target in (None, key[1])
    ]
    if not keys:
        world.unanswered.append(approval)
    for key in keys:
        decision = world.proposals.pop(key)
        if approval.approve:
            _apply_approved(world, index, decision)


def _apply_approved(world: _World, index: int, decision: Decision) -> None:
    assert decision.intent is not None
    knobs = world.knobs[decision.target]
    moved = [
        f"{knob} is {knobs.get(knob, float('nan')):g} now; the proposal assumed {was:g}"
        for knob, was in decision.intent.current.items()
        if knobs.get(knob) != was
    ]
    if moved:
        stale = _event(index, decision, kind="blocked")
        world.events.append(replace(stale, guard="stale_proposal", reason="; ".join(moved)))
    else:
        _apply(world, index, decision)


def _apply(world: _World, index: int, decision: Decision) -> None:
    assert decision.intent is not None
    now = index * world.suite.interval_s
    for knob, value in decision.intent.changes.items():
        world.knobs[decision.target][knob] = value
        key = (decision.target, knob)
        world.history[key] = world.history.get(key, KnobHistory()).changed(now)
    world.events.append(_event(index, decision, kind="applied"))


def _event(index: int, decision: Decision, kind: str | None = None) -> Event:
    intent = decision.intent
    return Event(
        tick=index,
        kind=kind or decision.kind.value,
        policy=decision.policy,
        target=decision.target,
        changes=None if intent is None else dict(intent.changes),
        operation=None if intent is None else intent.operation,
        guard=None if kind in ("applied", "proposed") else decision.guard,
        reason=str(decision.details.get("reason", "")) if kind is None else "",
        evidence=decision.evidence,
        firing_for_s=decision.details.get("firing_for_s") if kind is None else None,
    )
