"""Preflight of a log-level change: every reason not to make it, before anything is sent. Pure.

In order: the request is for this target and asks for ``log_level`` alone (a vLLM knob or an
operation can never be sent to a live service); no freeze; the level in force is known and is
still the one the policy decided on; the new level is inside the envelope and differs from the
one in force; the dwell time and hourly budget, read from the journal, allow another change.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from daemon.api import (
    LOG_LEVEL_KNOB,
    ChangeRequest,
    Envelope,
    HttpLogLevelTarget,
    envelope_problem,
    pace_problem,
)

Refusal = tuple[str, str]  # (guard, why)


def preflight(
    target: HttpLogLevelTarget,
    request: ChangeRequest,
    *,
    in_force: float | None,
    frozen: str,
    changed_at: Sequence[datetime],
    now: datetime,
) -> list[Refusal]:
    """Every refusal, in the order above; an empty list means the change may go ahead."""
    if request.target != target.name:
        return [("target", f"the request is for {request.target}, not {target.name}")]
    others = sorted(set(request.changes) - {LOG_LEVEL_KNOB})
    if others or request.operation is not None or LOG_LEVEL_KNOB not in request.changes:
        what = ", ".join(others) or (f"operation {request.operation}" if request.operation else "")
        what = what or "a request without log_level"
        why = f"{target.name} is a live log-level target: it takes log_level only, not {what}"
        return [("not_actuated", why)]
    refusals: list[Refusal] = []
    if frozen:
        refusals.append(("frozen", frozen))
    new = request.changes[LOG_LEVEL_KNOB]
    if in_force is None:
        why = f"the log level of {target.name} in force is not known (read back failed)"
        return [*refusals, ("unknown_current_value", why)]
    envelope = Envelope(**target.knob.model_dump())
    if problem := envelope_problem(LOG_LEVEL_KNOB, envelope, in_force, new):
        refusals.append(("envelope", problem))
    seen = request.current.get(LOG_LEVEL_KNOB)
    if seen is not None and seen != in_force:
        why = f"log_level is {in_force:g} now, not {seen:g} as when the policy decided"
        refusals.append(("stale", why))
    if new == in_force:
        refusals.append(("no_change", f"log_level is already {new:g}"))
    if late := pace_problem(LOG_LEVEL_KNOB, envelope, changed_at, now):
        refusals.append(("knob_budget", late))
    return refusals
