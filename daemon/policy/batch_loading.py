"""A ``batch`` action as written, to its :class:`~daemon.policy.spec.BatchLaneSpec` or problems.

The shape is pydantic's (:class:`~daemon.policy.spec.BatchModel`); what it cannot say is
checked here: an opening action names its width (a CEL number over signals and ``current``,
the lane's width now), a closing one does not (nor a ``start_spacing``), a constant width is
a whole number of requests of at least 1, a spacing is a duration or a CEL number of seconds,
and the lane is live (no restart, nothing to approve), so ``risk: approval`` would promise a
review that never happens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from daemon.policy.durations import parse_duration
from daemon.policy.expressions import CURRENT, Expression, ExpressionError
from daemon.policy.spec import BatchLaneSpec, BatchModel

Problem = tuple[tuple[str | int, ...], str]  # key path under action, message


@dataclass(frozen=True, slots=True)
class LoadedLane:
    """The spec (None when a problem was found) and every problem, key paths under action."""

    spec: BatchLaneSpec | None
    problems: list[Problem] = field(default_factory=list)


def batch_lane_spec(
    model: BatchModel, risk: str | None, compile_action: Callable[[str], Expression]
) -> LoadedLane:
    """Check and compile one ``batch`` action."""
    problems: list[Problem] = []
    if risk == "approval":
        message = (
            "the batch lane is a live change (no restart): it is never sent for approval; "
            "remove `risk`"
        )
        problems.append((("risk",), message))
    if not model.open:
        if model.concurrency is not None:
            message = "a closed lane has no concurrency: remove it, or write `open: true`"
            problems.append((("batch", "concurrency"), message))
        if model.start_spacing is not None:
            message = "a closed lane starts nothing: remove start_spacing, or write `open: true`"
            problems.append((("batch", "start_spacing"), message))
        return LoadedLane(None if problems else BatchLaneSpec(None), problems)
    if model.concurrency is None:
        message = 'an open lane needs its width: `concurrency: 4` or a CEL number ("current + 1.0")'
        problems.append((("batch", "concurrency"), message))
        return LoadedLane(None, problems)
    expression, problem = _width(model.concurrency, compile_action)
    if problem:
        problems.append((("batch", "concurrency"), problem))
    spacing, spacing_expression, problem = _spacing(model.start_spacing, compile_action)
    if problem:
        problems.append((("batch", "start_spacing"), problem))
    lane = BatchLaneSpec(expression, spacing, spacing_expression)
    return LoadedLane(None if problems else lane, problems)


def _spacing(
    value: str | int | float | None, compile_action: Callable[[str], Expression]
) -> tuple[float, Expression | None, str]:
    """A constant spacing (a duration), or a CEL number of seconds, or why it is neither."""
    if value is None:
        return 0.0, None, ""
    try:
        return parse_duration(value), None, ""
    except ValueError as exc:
        if not isinstance(value, str):
            return 0.0, None, str(exc)
    try:
        expression = compile_action(value)
    except ExpressionError as exc:
        message = f"neither a duration (e.g. 250ms) nor a CEL number of seconds: {exc}"
        return 0.0, None, message
    if expression.result_type == "bool" or CURRENT in expression.signals:
        return 0.0, None, "a CEL number of seconds over signals, not true or false or `current`"
    return 0.0, expression, ""


def _width(
    value: str | int | float, compile_action: Callable[[str], Expression]
) -> tuple[Expression | None, str]:
    """The compiled width, or why it is not one."""
    if isinstance(value, bool):
        return None, "a number of requests, not a boolean"
    if isinstance(value, int | float) and not (math.isfinite(value) and value >= 1):
        return None, f"{value} requests: an open lane takes at least 1 (write `open: false`)"
    try:
        expression = compile_action(str(value))
    except ExpressionError as exc:
        return None, f"{exc} (expression column {exc.column})"
    if expression.result_type == "bool":
        return None, "a number of requests, not true or false"
    return expression, ""


def lane_policy_problems(lane: BatchLaneSpec, on_no_data: str, scheduled_at: bool) -> list[Problem]:
    """What a batch lane cannot be paired with in its policy (key paths from the policy's top).

    A lane acts through its policy's firing, so: an opening lane with ``on_no_data:
    assume_bad`` would open on missing data (a closing one may: it closes on none); and
    ``schedule.at`` (act at moments) means nothing to a lane that is open while the policy
    fires, and would read as "open at 01:00": ``schedule.windows`` bounds a lane in time.
    """
    problems: list[Problem] = []
    if lane.concurrency is not None and on_no_data == "assume_bad":
        message = (
            "an opening batch lane never acts on missing data: assume_bad would open it on no "
            "data (use hold or assume_ok; a closing one, open: false, may use it)"
        )
        problems.append((("on_no_data",), message))
    if scheduled_at:
        message = (
            "a batch lane is open while its policy fires, not at moments: bound it in time "
            "with schedule.windows (e.g. [{cron: '0 1 * * *', duration: 5h}])"
        )
        problems.append((("schedule", "at"), message))
    return problems
