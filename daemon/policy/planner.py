"""The planner: what policies want, turned into changes inside each knob's envelope.

Pure, like evaluation. For each intent, per knob:

0. **Vetoes.** While a veto policy fires on a server (GPU throttling, XID errors), no policy
   may move the vetoed knobs the unsafe way (``veto``); moves the safe way still pass.
1. **Conflicts.** When several policies want the same knob of the same server in one tick, the
   *safer* direction wins (:mod:`daemon.core.knobs`: fewer sequences, smaller budgets, quieter
   logs); the others are blocked with ``conflict``.
2. **Envelope.** A knob without an envelope is never changed (``no_envelope``). The wanted value
   is clamped to ``[min, max]``, then moved at most ``max_step`` from the current value, and
   rounded for integer knobs (towards the current value, so a step never overshoots).
3. **No-op.** A knob that would stay where it is drops out of the change; if every knob of
   the intent would, nothing happens (``no_change``).
4. **Dwell and budget.** A knob changed less than ``min_dwell_s`` ago stays (``dwell``); one
   changed ``hourly_budget`` times in the last hour stays (``knob_budget``).

An intent is all or nothing: if any of its knobs is blocked, none of them changes.
Operations (a restart) are not bounded by envelopes; the gate serialises them per server.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from daemon.core.knobs import KNOBS, Safer
from daemon.core.settings import Envelope
from daemon.policy.decisions import Decision, DecisionKind, Intent
from daemon.policy.state import HOUR_S

KnobKey = tuple[str, str]  # (target, knob)


@dataclass(frozen=True, slots=True)
class KnobHistory:
    """When a knob of a server was changed: the last time, and within the last hour."""

    last_change_at: float | None = None
    changes: tuple[float, ...] = ()

    def changed(self, now: float) -> KnobHistory:
        """The history after a change at ``now``."""
        recent = tuple(at for at in self.changes if now - at < HOUR_S)
        return KnobHistory(now, (*recent, now))


@dataclass(frozen=True, slots=True)
class Plan:
    """The planner's answer: intents with their final values, and the ones it blocked."""

    accepted: tuple[Decision, ...]
    blocked: tuple[Decision, ...]


def plan(
    intents: Sequence[Decision],
    envelopes: Mapping[KnobKey, Envelope],
    history: Mapping[KnobKey, KnobHistory],
    now: float,
    vetoes: Mapping[KnobKey, str] | None = None,
) -> Plan:
    """Resolve conflicts and apply envelopes, dwell and budgets; see the module docstring.

    ``vetoes`` maps a (target, knob) to the firing policy that forbids moving it the unsafe way.
    """
    vetoes = vetoes or {}
    winners = _conflict_winners(intents)
    accepted: list[Decision] = []
    blocked: list[Decision] = []
    for decision in intents:
        intent = decision.intent
        assert intent is not None
        assert decision.kind is DecisionKind.INTENT
        guard, reason, bounded = None, "", {}
        unchanged: list[str] = []
        for knob, wanted in intent.changes.items():
            key = (decision.target, knob)
            if winners.get(key) is not decision:
                guard, reason = "conflict", f"another policy moves {knob} the safer way"
                break
            if key in vetoes and not _safer(knob, wanted, intent.current[knob]):
                guard, reason = "veto", f"{vetoes[key]} forbids moving {knob} that way"
                break
            guard, reason, value = _bound(
                key, wanted, intent, envelopes=envelopes, history=history, now=now
            )
            if guard == "no_change":
                guard, reason = None, ""
                unchanged.append(knob)
                continue
            if guard is not None:
                break
            bounded[knob] = value
        if guard is None and unchanged and not bounded:
            guard, reason = "no_change", f"{', '.join(unchanged)} already where wanted (bounded)"
        if guard is None:
            final = replace(intent, changes=bounded)
            accepted.append(replace(decision, intent=final))
        else:
            blocked.append(
                replace(
                    decision, kind=DecisionKind.BLOCKED, guard=guard, details={"reason": reason}
                )
            )
    return Plan(tuple(accepted), tuple(blocked))


def _conflict_winners(intents: Sequence[Decision]) -> dict[KnobKey, Decision]:
    winners: dict[KnobKey, Decision] = {}
    for decision in intents:
        assert decision.intent is not None
        for knob, wanted in decision.intent.changes.items():
            key = (decision.target, knob)
            best = winners.get(key)
            if best is None or _safer(knob, wanted, _wanted(best, knob)):
                winners[key] = decision
    return winners


def _wanted(decision: Decision, knob: str) -> float:
    assert decision.intent is not None
    return decision.intent.changes[knob]


def _safer(knob: str, candidate: float, incumbent: float) -> bool:
    lower_is_safer = KNOBS[knob].safer is Safer.LOWER
    return candidate < incumbent if lower_is_safer else candidate > incumbent


def _bound(
    key: KnobKey,
    wanted: float,
    intent: Intent,
    *,
    envelopes: Mapping[KnobKey, Envelope],
    history: Mapping[KnobKey, KnobHistory],
    now: float,
) -> tuple[str | None, str, float]:
    target, knob = key
    envelope = envelopes.get(key)
    if envelope is None:
        return "no_envelope", f"{target} has no envelope for {knob} in config.toml", wanted
    current = intent.current[knob]
    value = min(max(wanted, envelope.min), envelope.max)
    value = min(max(value, current - envelope.max_step), current + envelope.max_step)
    if KNOBS[knob].kind is not float:
        # Towards the current value, so that rounding never takes a step past max_step.
        value = float(math.floor(value) if value > current else math.ceil(value))
        value = min(max(value, math.ceil(envelope.min)), math.floor(envelope.max))
    if value == current:
        return "no_change", f"{knob} is already {current:g} (wanted {wanted:g}, bounded)", value
    past = history.get(key, KnobHistory())
    if past.last_change_at is not None and now - past.last_change_at < envelope.min_dwell_s:
        waited = now - past.last_change_at
        return (
            "dwell",
            f"{knob} changed {waited:.0f} s ago (dwell {envelope.min_dwell_s:g} s)",
            value,
        )
    if sum(1 for at in past.changes if now - at < HOUR_S) >= envelope.hourly_budget:
        return "knob_budget", f"{knob} already changed {envelope.hourly_budget}x this hour", value
    return None, "", value
