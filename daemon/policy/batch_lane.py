"""How wide the batch lane of one target should be now: a pure function of the batch policies.

    lane_width(specs, states, view, wall, current, ceiling) -> LaneWidth | None

A ``batch`` action acts through its policy's firing, like an admission loop: the evaluator
decides whether the policy fires (``when``, ``for``, ``clear``, ``keep_firing_for``), and the
lane is as wide as the firing policies say, at every look:

* **Ungoverned.** No active batch policy applies to the target: None. The engine then runs
  jobs at ``[batch] concurrency``, as without policies.
* **Closed.** No batch policy fires (or none inside its schedule windows), or a firing one
  says ``open: false``: width 0. Closing wins over any opening policy.
* **Open.** Each firing opening policy's ``concurrency`` is evaluated over fresh signals and
  ``current`` (the lane's width now); the narrowest wins (the safer direction), rounded down,
  within ``[0, ceiling]``. A value that lacks data holds the lane where it is (never wider),
  as an admission controller holds; an expression that fails closes the lane.
* **Paced.** An open lane's ``spacing_s`` is the longest ``start_spacing`` of the firing
  opening policies (the safer direction again): the least time between two batch requests'
  starts, so that their prefills do not land in the same engine step. A spacing may be a CEL
  number of seconds over signals (a pace that slows as online load grows); one that lacks
  data holds ``current_spacing_s``, one that fails closes the lane.

Shadow policies never steer the lane (their firing is recorded, nothing more).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from daemon.policy.evaluate import TargetView
from daemon.policy.expressions import CURRENT, ExpressionError, MissingData
from daemon.policy.spec import PolicySpec
from daemon.policy.state import Phase, PolicyState


@dataclass(frozen=True, slots=True)
class LaneWidth:
    """How many batch requests may be in flight on the target, and why.

    Attributes:
        width: 0 closes the lane.
        policy: The policy that decided, or None when none fires.
        reason: One line for people.
        spacing_s: The least time between two of the lane's request starts (0: none).
    """

    width: int
    policy: str | None
    reason: str
    spacing_s: float = 0.0


def batch_policies(specs: Sequence[PolicySpec], target: str) -> list[PolicySpec]:
    """The active batch policies that watch ``target``, by name."""
    return sorted(
        (
            spec
            for spec in specs
            if spec.action is not None
            and spec.action.batch is not None
            and not spec.shadow
            and spec.applies_to(target)
        ),
        key=lambda spec: spec.name,
    )


def lane_width(
    specs: Sequence[PolicySpec],
    states: Mapping[tuple[str, str], PolicyState],
    view: TargetView,
    wall: datetime,
    *,
    current: int,
    ceiling: int,
    current_spacing_s: float = 0.0,
) -> LaneWidth | None:
    """The lane's width on ``view.target`` now; None when no batch policy governs it."""
    watching = batch_policies(specs, view.target)
    if not watching:
        return None
    firing = [spec for spec in watching if _acts(spec, states, view.target, wall)]
    if not firing:
        return LaneWidth(0, None, "no batch policy fires: the lane is closed")
    widths: list[LaneWidth] = []
    for spec in firing:
        assert spec.action is not None
        assert spec.action.batch is not None
        expression = spec.action.batch.concurrency
        if expression is None:
            return LaneWidth(0, spec.name, f"{spec.name} fires: the lane is closed")
        names = expression.signals - {CURRENT}
        values = {name: view.signals[name] for name in names if name in view.signals}
        try:
            value = expression.evaluate({**values, CURRENT: float(current)})
        except MissingData:
            reason = f"{spec.name}: a signal of its concurrency has no fresh value, hold"
            widths.append(LaneWidth(current, spec.name, reason))
            continue
        except ExpressionError as exc:
            return LaneWidth(0, spec.name, f"{spec.name}: its concurrency failed ({exc}): closed")
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            return LaneWidth(0, spec.name, f"{spec.name}: its concurrency gave {value!r}: closed")
        width = int(min(max(value, 0.0), float(ceiling)))
        widths.append(LaneWidth(width, spec.name, f"{spec.name}: {expression.source} = {value:g}"))
    spacing = _longest_spacing(firing, view, current_spacing_s)
    narrowest = min(widths, key=lambda lane: lane.width)
    return spacing if isinstance(spacing, LaneWidth) else replace(narrowest, spacing_s=spacing)


def _longest_spacing(
    firing: Sequence[PolicySpec], view: TargetView, current_s: float
) -> float | LaneWidth:
    """The longest spacing of the firing policies, or the closed lane one of them asks for."""
    spacings: list[float] = []
    for spec in firing:
        spacing = _spacing(spec, view, current_s)
        if isinstance(spacing, str):
            return LaneWidth(0, spec.name, spacing)
        spacings.append(spacing)
    return max(spacings)


def _spacing(spec: PolicySpec, view: TargetView, current_s: float) -> float | str:
    """The policy's ``start_spacing`` now, in seconds, or why the lane closes.

    A constant is itself; an expression is evaluated over fresh signals: one that lacks data
    holds the spacing in force (as a width holds), one that fails or gives no number of seconds
    closes the lane.
    """
    assert spec.action is not None
    assert spec.action.batch is not None
    expression = spec.action.batch.start_spacing
    if expression is None:
        return spec.action.batch.start_spacing_s
    values = {name: view.signals[name] for name in expression.signals if name in view.signals}
    try:
        value = expression.evaluate(values)
    except MissingData:
        return current_s
    except ExpressionError as exc:
        return f"{spec.name}: its start_spacing failed ({exc}): closed"
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        return f"{spec.name}: its start_spacing gave {value!r}: closed"
    return float(value)


def _acts(
    spec: PolicySpec,
    states: Mapping[tuple[str, str], PolicyState],
    target: str,
    wall: datetime,
) -> bool:
    """Whether ``spec`` fires on ``target`` and is inside one of its windows (if it has any)."""
    state = states.get((spec.name, target))
    in_window = not spec.windows or any(window.contains(wall) for window in spec.windows)
    return state is not None and state.phase is Phase.FIRING and in_window


def fcfs_bound(decided: LaneWidth, view: TargetView, share: float) -> LaneWidth:
    """The width a server without priority scheduling allows: the governor's only protection.

    Under ``fcfs`` an online request that arrives while every sequence slot is taken waits
    behind whatever is queued, batch requests included, and nothing overtakes. So the lane
    takes only slots online requests leave free, one kept spare for the next arrival
    (``max-num-seqs - running - waiting - 1``, the view's online counts), at most ``share`` of
    ``max-num-seqs`` (1 request while ``max-num-seqs`` is unknown); and it closes whenever an
    online request waits (``waiting`` > 0) or ``waiting`` or ``running`` has no fresh value: a
    queue means the slots are wanted, and unknown means do not act. Taking only free slots
    also keeps the lane's own requests from queueing ahead of online ones.
    """
    if decided.width == 0:
        return decided
    waiting, running = view.signals.get("waiting"), view.signals.get("running")
    if not isinstance(waiting, int | float) or not isinstance(running, int | float):
        return LaneWidth(0, decided.policy, "fcfs: no fresh `waiting` or `running`, closed")
    if waiting > 0:
        return LaneWidth(0, decided.policy, f"fcfs: {waiting:g} request(s) wait in vLLM, closed")
    seqs = view.knobs.get("max_num_seqs")
    if seqs is None:
        cap, where = 1, "max-num-seqs unknown"
    else:
        free = int(seqs - running - waiting) - 1
        cap = max(0, min(max(1, int(seqs * share)), free))
        where = f"{share:g} of max-num-seqs {seqs:g}, {max(free, 0)} slot(s) free of online"
    if decided.width <= cap:
        return decided
    if cap == 0:
        return LaneWidth(0, decided.policy, f"fcfs: no slot free of online ({where}), closed")
    reason = f"{decided.reason}; fcfs: at most {cap} ({where})"
    return LaneWidth(cap, decided.policy, reason, decided.spacing_s)
