"""The replay: recorded ticks through the real policy core, as the evaluator would run them.

At each recorded tick, as :class:`~daemon.engine.evaluation.evaluator.Evaluator` does:

1. the recorded views (fresh signals, knob values as recorded) go to
   :func:`daemon.policy.tick.tick` with the envelopes of the configuration, the policy states
   and the knobs' histories (dwell, hourly budgets);
2. the accepted intents go through the routing (:func:`daemon.engine.actuation.routing.route`):
   risk ``auto`` would be applied, risk ``approval`` would wait for a person, and what the
   routing refuses (a server without ``config_path``, an unknown operation) is blocked there;
3. an ``auto`` change enters its knobs' histories as the daemon enters an applied change
   (:func:`daemon.engine.evaluation.policy_ledger.changed_histories`), so the next ticks meet
   dwell and budgets as they would have. The knob values stay as recorded: what the server
   would have done after a change is not known, so a backtest shows decisions, not their
   consequences.

What happens after the routing (the actuator's preflight: one change in flight, freezes, the
restart budget; verification and reverts) is not replayed: it needs the server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from actuators.kinds import VLLM
from daemon.app.backtest.recording import RecordedTick
from daemon.core.settings import Envelope, VllmInstance
from daemon.engine.actuation.routing import Owner, route
from daemon.engine.evaluation.policy_ledger import changed_histories
from daemon.policy.decisions import Decision, DecisionKind
from daemon.policy.planner import KnobHistory, KnobKey
from daemon.policy.spec import PolicySpec
from daemon.policy.state import PolicyState
from daemon.policy.tick import StateKey, tick

AUTO, APPROVAL = "auto", "approval"


@dataclass(frozen=True, slots=True)
class Event:
    """One decision of the would-have timeline.

    Attributes:
        index: The recorded tick it came from (0-based), the same in every replay of a file.
        at_s: Seconds since the first tick, on the replay's clock.
        wall: The tick's recorded wall-clock time.
        kind: ``fired``, ``resolved``, ``intent``, ``blocked``, ``shadow`` or ``alert``.
        policy: The policy's name.
        target: The vLLM instance.
        route: For an intent the routing let through: ``auto`` or ``approval``.
        changes: Knob values wanted (intents: bounded by the envelopes).
        current: Knob values when the policy decided.
        operation: An operation asked for (``restart``), if any.
        guard: What blocked it (``dwell``, ``knob_budget``, ``cooldown``...).
        reason: The guard's sentence.
        signals: The evidence: each signal the policy read, and its value.
    """

    index: int
    at_s: float
    wall: datetime
    kind: str
    policy: str
    target: str
    route: str | None = None
    changes: dict[str, float] | None = None
    current: dict[str, float] | None = None
    operation: str | None = None
    guard: str | None = None
    reason: str = ""
    signals: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Setup:
    """What a replay needs besides the ticks: the policies, envelopes and instances."""

    specs: Sequence[PolicySpec]
    envelopes: Mapping[KnobKey, Envelope]
    instances: Mapping[str, VllmInstance]


def replay(setup: Setup, ticks: Sequence[RecordedTick]) -> tuple[Event, ...]:
    """Every decision the policies would have taken over ``ticks``, in order. Pure."""
    states: dict[StateKey, PolicyState] = {}
    history: dict[KnobKey, KnobHistory] = {}
    events: list[Event] = []
    clock = _ReplayClock()
    for index, recorded in enumerate(ticks):
        now = clock.advance(recorded)
        result = tick(
            setup.specs,
            states,
            recorded.views,
            envelopes=setup.envelopes,
            history=history,
            now=now,
            wall=recorded.wall,
        )
        states = result.states
        routing = route(result.accepted, _owners(setup.instances), {})
        routes = {(r.policy, r.target): AUTO for _, r in routing.auto}
        routes |= {(r.policy, r.target): APPROVAL for r in routing.proposals}
        for _, request in routing.auto:
            history |= changed_histories(history, request.target, request.changes, now)
        at_s = now - clock.start
        for decision in (*result.decisions, *routing.blocked):
            way = routes.get((decision.policy, decision.target))
            events.append(_event(index, at_s, recorded.wall, decision, way))
    return tuple(events)


@dataclass
class _ReplayClock:
    """The recorded monotonic clock, made to run forward across daemon restarts.

    A recording may span restarts of the daemon or of the host; where the monotonic clock goes
    back (a reboot), the wall clock's advance stands in for it.
    """

    start: float = 0.0
    now: float | None = None
    last: RecordedTick | None = None

    def advance(self, recorded: RecordedTick) -> float:
        if self.now is None or self.last is None:
            self.start = self.now = recorded.monotonic
        else:
            step = recorded.monotonic - self.last.monotonic
            if step < 0:
                step = max(0.0, (recorded.wall - self.last.wall).total_seconds())
            self.now += step
        self.last = recorded
        return self.now


def _event(index: int, at_s: float, wall: datetime, decision: Decision, way: str | None) -> Event:
    intent = decision.intent
    return Event(
        index=index,
        at_s=at_s,
        wall=wall,
        kind=decision.kind.value,
        policy=decision.policy,
        target=decision.target,
        route=way if decision.kind is DecisionKind.INTENT else None,
        changes=None if intent is None else dict(intent.changes),
        current=None if intent is None else dict(intent.current),
        operation=None if intent is None else intent.operation,
        guard=decision.guard,
        reason=str(decision.details.get("reason", "")),
        signals=dict(decision.evidence.signals),
    )


def _owners(instances: Mapping[str, VllmInstance]) -> dict[str, Owner]:
    """The servers the vLLM actuator would change: those with a ``config_path``."""
    return {
        name: Owner(VLLM, instance)
        for name, instance in instances.items()
        if instance.config_path is not None
    }
