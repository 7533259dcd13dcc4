"""Evaluation: a pure function of (spec, state, what the target looks like, now).

    evaluate(spec, state, view, now, wall) -> (new state, decisions)

Semantics, in the order they apply:

* ``when`` is tested on fresh values only; when a signal without a fresh value matters to the
  result (CEL settles ``true || x`` without ``x``), the result is *no data* and ``on_no_data``
  decides: ``hold`` changes nothing at all, ``assume_ok`` reads it as false,
  ``assume_bad`` as true, but a policy firing on missing data only alerts, it never acts.
  Under ``hold``, time without data counts toward no timer: ``for`` and ``keep_firing_for``
  pause, and a gap as long as the timer starts it over (:meth:`PolicyState.seeing`).
  An implausible value (outside its signal's domain, :mod:`daemon.sources.domains`) is no
  value either: the view lacks it, and says why in ``implausible``.
* When ``when`` or ``clear`` fails to evaluate (an integer division by zero, CEL's iteration
  budget exceeded), that is an *error*, not no data: the policy holds (its phase; its timers
  stop counting, as without data) and carries the message in its state; an ``error``
  decision is recorded once per message.
  The next evaluation that succeeds clears it.
* Inactive → pending when ``when`` holds; pending → firing once it has held for ``for``
  (pending → inactive as soon as it does not).
* Firing stops only when the exit condition (``clear``, or "``when`` no longer holds" when there
  is no ``clear``) has held for ``keep_firing_for``. Between the two thresholds the policy keeps
  firing: that is the hysteresis.
* A firing policy acts when it starts firing, and again each time its ``cooldown`` has passed
  while ``when`` still holds: once, not at every tick. A scheduled change (``schedule.at``)
  acts at its cron moments instead, once each.
* Guards, in order: the schedule's windows, the cooldown, the hourly budget, shadow mode. A
  blocked attempt is recorded once per guard, not at every tick.
* A ``tune`` action, when due, is a ``tune`` decision (paced like a change: it starts the
  cooldown and counts in the budget) carrying the question and the tuned knobs' values in
  force; the engine runs the what-if and plans its pick as an ordinary intent.

The knob envelopes (min, max, step, dwell, per-knob budget) and conflicts between policies are
the planner's business: this module only says what a policy wants and why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from daemon.policy.decisions import Decision, DecisionKind, Evidence, Intent
from daemon.policy.expressions import (
    CURRENT,
    EvaluationError,
    Expression,
    ExpressionError,
    MissingData,
)
from daemon.policy.notify_text import render
from daemon.policy.spec import NoData, NotifySpec, PolicySpec, TuneSpec
from daemon.policy.state import Phase, PolicyState

# How late a scheduled change may still run: long enough to survive a governor restart.
AT_GRACE_S = 600.0


@dataclass(frozen=True, slots=True)
class TargetView:
    """One target as the policies see it at one moment.

    Attributes:
        target: The vLLM instance name.
        signals: Every signal with a fresh value: floats, or maps of floats for host and GPU
            series. A name absent from here has no fresh data.
        knobs: The current value of each knob, when known.
        implausible: Signals whose fresh value was implausible, with the reason; they are
            absent from ``signals``, so evaluation treats them as no data.
    """

    target: str
    signals: Mapping[str, Any]
    knobs: Mapping[str, float]
    implausible: Mapping[str, str] = field(default_factory=dict)


def evaluate(
    spec: PolicySpec, state: PolicyState, view: TargetView, now: float, wall: datetime
) -> tuple[PolicyState, list[Decision]]:
    """One evaluation of ``spec`` on ``view.target``; see the module docstring."""
    try:
        after, decisions = _evaluate(spec, state, view, now, wall)
    except EvaluationError as exc:
        message = str(exc)
        if state.error == message:
            return state.blind(now), []
        evidence = _evidence(spec.when, view, state, now, note=message)
        error = _decision(spec, view, now, DecisionKind.ERROR, evidence, details={"error": message})
        # A condition that cannot be evaluated is not seen holding either: timers stop counting.
        return replace(state.blind(now), error=message), [error]
    return (after if after.error is None else replace(after, error=None)), decisions


def _evaluate(
    spec: PolicySpec, state: PolicyState, view: TargetView, now: float, wall: datetime
) -> tuple[PolicyState, list[Decision]]:
    truth = _truth(spec.when, view)
    no_data = truth is None
    if truth is None:
        if spec.on_no_data is NoData.HOLD:
            return state.blind(now), []  # no transition, and a running timer stops counting
        truth = spec.on_no_data is NoData.ASSUME_BAD
    holds: bool = truth
    decisions: list[Decision] = []
    state, started = _advance(spec, state, view, now, holds=holds, decisions=decisions)
    if state.phase is not Phase.FIRING or not holds:
        return state, decisions
    # Firing began once the condition had held for `for`: count that time too, or the first
    # action's evidence would say "held for 0 s".
    evidence = _evidence(spec.when, view, state, now, earlier_s=spec.for_s)
    if no_data:
        if started:
            decisions.append(_decision(spec, view, now, DecisionKind.ALERT, evidence))
        return state, decisions
    action = spec.action
    if action is None or action.vetoes or action.admission is not None or action.batch:
        return state, decisions  # alerts, vetoes, admission loops, batch lanes: by firing
    if not _due(spec, state, now, wall, started):
        return state, decisions
    return _attempt(spec, state, view, now, wall=wall, evidence=evidence, decisions=decisions)


def _advance(
    spec: PolicySpec,
    state: PolicyState,
    view: TargetView,
    now: float,
    *,
    holds: bool,
    decisions: list[Decision],
) -> tuple[PolicyState, bool]:
    """Move through inactive → pending → firing → inactive; say whether firing just began."""
    if state.phase is Phase.INACTIVE and holds:
        state = PolicyState(Phase.PENDING, now, None, state.last_action_at, state.actions)
    if state.phase is Phase.PENDING:
        state = state.seeing(now, spec.for_s)
        if not holds:
            return replace(state, phase=Phase.INACTIVE, since=now), False
        assert state.since is not None
        if now - state.since < spec.for_s:
            return state, False
        evidence = _evidence(spec.when, view, state, now)
        decisions.append(_decision(spec, view, now, DecisionKind.FIRED, evidence))
        return replace(state, phase=Phase.FIRING, since=now, clearing_since=None), True
    if state.phase is Phase.FIRING:
        return _maybe_resolve(spec, state, view, now, holds=holds, decisions=decisions), False
    return state, False


def _maybe_resolve(
    spec: PolicySpec,
    state: PolicyState,
    view: TargetView,
    now: float,
    *,
    holds: bool,
    decisions: list[Decision],
) -> PolicyState:
    exit_holds = (not holds) if spec.clear is None else _truth(spec.clear, view)
    if exit_holds is None:  # the clear condition lacks data
        if spec.on_no_data is NoData.HOLD:
            return state.blind(now)
        exit_holds = spec.on_no_data is NoData.ASSUME_OK
    state = state.seeing(now, spec.keep_firing_for_s)
    if not exit_holds:
        return replace(state, clearing_since=None)
    clearing_since = state.clearing_since if state.clearing_since is not None else now
    if now - clearing_since < spec.keep_firing_for_s:
        return replace(state, clearing_since=clearing_since)
    # The evidence of a resolve is the exit condition's: how long *it* held, not how long the
    # policy fired (that is the detail ``firing_for_s``).
    condition = spec.clear or spec.when
    clearing = replace(state, since=clearing_since)
    evidence = _evidence(condition, view, clearing, now, note="exit condition held")
    assert state.since is not None
    details = {"firing_for_s": now - state.since}
    decisions.append(_decision(spec, view, now, DecisionKind.RESOLVED, evidence, details=details))
    return replace(state, phase=Phase.INACTIVE, since=now, clearing_since=None)


def _due(spec: PolicySpec, state: PolicyState, now: float, wall: datetime, started: bool) -> bool:
    """Whether a firing policy should try to act now: on starting, then once per cooldown.

    A scheduled change (``schedule.at``) acts only at its moments instead: once per moment,
    at the first evaluation after it (up to ``AT_GRACE_S`` late, after a restart say).
    """
    if spec.at:
        moments = [m for t in spec.at if (m := t.latest(wall, AT_GRACE_S)) is not None]
        if not moments:
            return False
        moment = now - (wall - max(moments)).total_seconds()
        return state.last_action_at is None or state.last_action_at < moment
    if started or state.last_action_at is None:
        return True
    assert state.since is not None
    acted_this_episode = state.last_action_at >= state.since
    return not acted_this_episode or now - state.last_action_at >= spec.cooldown_s


def _attempt(
    spec: PolicySpec,
    state: PolicyState,
    view: TargetView,
    now: float,
    *,
    wall: datetime,
    evidence: Evidence,
    decisions: list[Decision],
) -> tuple[PolicyState, list[Decision]]:
    guard = _guard(spec, state, now, wall)
    tune = spec.action.tune if spec.action is not None else None
    if guard is None and tune is not None:
        intent, guard, detail = _tune_intent(spec, tune, view)
    elif guard is None:
        intent, guard, detail = _intent(spec, view)
    else:
        intent, detail = None, ""
    if guard is not None:
        if guard != state.blocked_by:
            decisions.append(
                _decision(
                    spec,
                    view,
                    now,
                    DecisionKind.BLOCKED,
                    evidence,
                    guard=guard,
                    details={"reason": detail} if detail else {},
                )
            )
        return state.blocked(guard), decisions
    if spec.action is not None and spec.action.notify is not None:
        # A notification is paced like a change (once per firing, then per cooldown, within
        # the budget) but never reaches the planner: it changes nothing.
        kind = DecisionKind.SHADOW if spec.shadow else DecisionKind.NOTIFY
        details = _notification(spec, spec.action.notify, view, evidence)
        decisions.append(_decision(spec, view, now, kind, evidence, details=details))
        return state.acted(now), decisions
    if tune is not None:
        # A what-if round is paced like a change (once per firing, then per cooldown, within
        # the budget): the engine runs it off the loop and plans its pick as an intent.
        kind = DecisionKind.SHADOW if spec.shadow else DecisionKind.TUNE
        details = {"tune": tune_question(tune)}
        decisions.append(_decision(spec, view, now, kind, evidence, intent, details=details))
        return state.acted(now), decisions
    if spec.shadow:
        decisions.append(_decision(spec, view, now, DecisionKind.SHADOW, evidence, intent))
        return state.acted(now), decisions
    decisions.append(_decision(spec, view, now, DecisionKind.INTENT, evidence, intent))
    return state, decisions


def _tune_intent(
    spec: PolicySpec, tune: TuneSpec, view: TargetView
) -> tuple[Intent | None, str | None, str]:
    """The tuned knobs' values in force (the values come from the what-if, later)."""
    assert spec.action is not None
    current: dict[str, float] = {}
    for knob in tune.knobs:
        value = view.knobs.get(knob)
        if value is None:
            return None, "unknown_current_value", f"the current {knob} is not known"
        current[knob] = float(value)
    return Intent({}, current, None, spec.action.risk), None, ""


def tune_question(tune: TuneSpec) -> dict[str, Any]:
    """A tune action as a decision's details: what the what-if round is asked."""
    return {
        "knobs": list(tune.knobs),
        "objective": tune.objective,
        "min_gain": tune.min_gain,
        "window_s": tune.window_s,
        "profile": tune.profile,
        "ttft_slo_s": tune.ttft_slo_s,
        "tpot_slo_s": tune.tpot_slo_s,
        "max_error": tune.max_error,
    }


def _notification(
    spec: PolicySpec, notify: NotifySpec, view: TargetView, evidence: Evidence
) -> dict[str, Any]:
    """The rendered text and its channels; fields come from the evidence, nothing else.

    ``held_for`` counts the policy's ``for`` too (the evidence does): people read it as how
    long the trouble lasts.
    """
    held = "" if evidence.held_for_s is None else f"{evidence.held_for_s:.0f} s"
    fields = {
        **evidence.signals,
        "policy": spec.name,
        "target": view.target,
        "held_for": held,
        "condition": evidence.condition,
    }
    return {"text": render(notify.text, fields), "channels": list(notify.channels)}


def _guard(spec: PolicySpec, state: PolicyState, now: float, wall: datetime) -> str | None:
    if spec.windows and not any(window.contains(wall) for window in spec.windows):
        return "schedule"
    if state.last_action_at is not None and now - state.last_action_at < spec.cooldown_s:
        return "cooldown"
    if state.actions_in_last_hour(now) >= spec.budget_per_hour:
        return "budget"
    return None


def _intent(spec: PolicySpec, view: TargetView) -> tuple[Intent | None, str | None, str]:
    """The knob values the policy wants, or the guard that prevents computing them."""
    assert spec.action is not None
    action = spec.action
    wanted: dict[str, float] = {}
    current: dict[str, float] = {}
    for change in action.changes:
        now_value = view.knobs.get(change.knob)
        if now_value is None:
            return None, "unknown_current_value", f"the current {change.knob} is not known"
        values = _values(change.value, view)
        if values is None:
            return None, "no_data", f"a signal of {change.knob}'s expression has no fresh value"
        try:
            result = change.value.evaluate({**values, CURRENT: float(now_value)})
        except MissingData:
            return None, "no_data", f"a map key of {change.knob}'s expression has no fresh value"
        except ExpressionError as exc:
            return None, "expression_error", str(exc)
        if isinstance(result, bool):
            result = 1.0 if result else 0.0
        if not isinstance(result, int | float) or not math.isfinite(result):
            return None, "expression_error", f"{change.value.source} gave {result!r}"
        wanted[change.knob] = float(result)
        current[change.knob] = float(now_value)
    return Intent(wanted, current, action.operation, action.risk), None, ""


def _values(expression: Expression, view: TargetView) -> dict[str, Any] | None:
    """The values of the signals ``expression`` reads, or None when one has no fresh data."""
    names = expression.signals - {CURRENT}
    if not names <= view.signals.keys():
        return None
    return {name: view.signals[name] for name in names}


def _truth(expression: Expression, view: TargetView) -> bool | None:
    """True, false, or None when fresh data cannot decide.

    Only fresh signals are bound. CEL's ``||`` and ``&&`` are commutative and absorb a missing
    operand when the other decides (``true || ?`` is true, ``false && ?`` is false), so a
    condition can be settled by fresh data alone; when it cannot, evaluation says a value is
    missing, which is "no data". Stale data never takes part either way.

    Raises:
        EvaluationError: the expression failed on its own account; not "no data".
    """
    available = {name: view.signals[name] for name in expression.signals if name in view.signals}
    try:
        return bool(expression.evaluate(available))
    except MissingData:
        return None  # a missing signal or map key mattered: no data


def condition_result(expression: Expression, view: TargetView) -> tuple[str, str | None]:
    """What a condition says on ``view`` now, and why when it cannot say.

    One of ``true``, ``false``, ``no_data``, ``implausible`` or ``error``. ``implausible`` is
    no data because a signal it reads had an implausible value; the second item is then the
    reasons (``running: -3 is outside its domain...``), and the message of an error.
    """
    try:
        truth = _truth(expression, view)
    except EvaluationError as exc:
        return "error", str(exc)
    if truth is None:
        reasons = implausible_reasons(expression, view)
        return ("implausible", reasons) if reasons else ("no_data", None)
    return str(truth).lower(), None


def implausible_reasons(expression: Expression, view: TargetView) -> str | None:
    """Why the signals ``expression`` reads are implausible on ``view``; None when none is."""
    names = sorted(name for name in expression.signals if name in view.implausible)
    if not names:
        return None
    return "; ".join(f"{name}: {view.implausible[name]}" for name in names)


def _evidence(
    expression: Expression,
    view: TargetView,
    state: PolicyState,
    now: float,
    note: str = "",
    *,
    earlier_s: float = 0.0,
) -> Evidence:
    """The condition, the values it read, and how long it has held.

    ``earlier_s`` is how long it had held before the state's phase began.
    """
    signals = {name: view.signals.get(name) for name in sorted(expression.signals - {CURRENT})}
    held = None if state.since is None else now - state.since + earlier_s
    return Evidence(expression.source, signals, held, note)


def _decision(  # noqa: PLR0917 - one call per kind of decision; the names are read at the call
    spec: PolicySpec,
    view: TargetView,
    now: float,
    kind: DecisionKind,
    evidence: Evidence,
    intent: Intent | None = None,
    *,
    guard: str | None = None,
    details: dict[str, Any] | None = None,
) -> Decision:
    return Decision(spec.name, view.target, now, kind, evidence, intent, guard, details or {})
