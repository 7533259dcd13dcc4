"""The envelope rules, as pure checks of one proposed change.

The planner (:mod:`daemon.policy.planner`) *bounds* what policies want into their envelopes;
these checks *verify* a change that claims to be bounded, on every path that changes a server
(the actuator's preflight included), so that no request from anywhere can step outside them.
Times are wall-clock here, because the actuator reads dwell and budgets from the journal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from daemon.core.knobs import KNOBS
from daemon.core.settings import Envelope

HOUR_S = 3600.0


def envelope_problem(knob: str, envelope: Envelope | None, current: float, new: float) -> str:
    """Why moving ``knob`` from ``current`` to ``new`` breaks its envelope; "" when it does not.

    The first of :func:`envelope_problems`.
    """
    problems = envelope_problems(knob, envelope, current, new)
    return problems[0] if problems else ""


def envelope_problems(
    knob: str,
    envelope: Envelope | None,
    current: float,
    new: float,
    *,
    kind: type | None = None,
) -> list[str]:
    """Every rule of its envelope that moving ``knob`` from ``current`` to ``new`` breaks.

    One sentence per rule (whole numbers, the range, the step), so that a person fixing the
    change sees all of them at once. ``kind`` is the knob's type where the knob is not one a
    policy names (the admission gate's ``gate_cap``, moved by the engine); else
    :data:`~daemon.core.knobs.KNOBS` says.
    """
    if envelope is None:
        return [f"{knob} has no envelope in config.toml: the governor never changes it"]
    if not math.isfinite(new):
        return [f"{knob}: {new!r} is not a number"]
    problems = []
    if (kind or KNOBS[knob].kind) is not float and new != math.floor(new):
        problems.append(f"{knob} takes whole numbers, not {new:g}")
    if not envelope.min <= new <= envelope.max:
        problems.append(
            f"{knob}={new:g} is outside its envelope [{envelope.min:g}, {envelope.max:g}]"
        )
    # A hair of tolerance: the planner computes steps in floating point.
    if abs(new - current) > envelope.max_step * (1 + 1e-9):
        step = abs(new - current)
        problems.append(f"{knob}: a step of {step:g} exceeds max_step {envelope.max_step:g}")
    return problems


def pace_problem(
    knob: str, envelope: Envelope, changed_at: Sequence[datetime], now: datetime
) -> str:
    """Why another change of ``knob`` now breaks its dwell time or hourly budget; "" if not."""
    ages = [(now - at).total_seconds() for at in changed_at]
    if ages and min(ages) < envelope.min_dwell_s:
        return f"{knob} changed {min(ages):.0f} s ago (dwell {envelope.min_dwell_s:g} s)"
    if sum(1 for age in ages if age < HOUR_S) >= envelope.hourly_budget:
        return f"{knob} already changed {envelope.hourly_budget}x in the last hour"
    return ""
