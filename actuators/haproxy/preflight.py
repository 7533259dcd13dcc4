"""Preflight of a cap change at an admission gate: every reason not to make it. Pure.

The same checks as every other path that changes a vLLM server, through the same functions:
the request is for this instance and asks for ``gate_cap`` alone (``not_actuated``); no freeze,
of the files or of the fleet (``frozen``); no other change of the instance in flight, such as a
restart (``in_flight``); the cap is inside its envelope, ``[1, max-num-seqs]`` as the request
says ``max-num-seqs`` is now (``envelope``, :func:`daemon.api.envelope_problems`). What the
gate holds now is read afterwards, by the actuator, just before it sends anything.

A cap is live, so only a freeze *in force* holds it, never a fleet that cannot be seen; and it
has no dwell time or hourly budget: its pace is its admission policy's ``interval_s``.
"""

from __future__ import annotations

from daemon.api import (
    GATE_CAP_KNOB,
    MAX_NUM_SEQS,
    ChangeRequest,
    VllmInstance,
    cap_envelope,
    envelope_problems,
)

Refusal = tuple[str, str]  # (guard, why)


def preflight(
    instance: VllmInstance, request: ChangeRequest, *, frozen: str, in_flight: str
) -> list[Refusal]:
    """Every refusal, in the order above; an empty list means the cap may be sent."""
    if request.target != instance.name:
        return [("target", f"change for {request.target} handed to instance {instance.name}")]
    others = sorted(set(request.changes) - {GATE_CAP_KNOB})
    if others or request.operation is not None or GATE_CAP_KNOB not in request.changes:
        what = ", ".join(others) or request.operation or "a request without gate_cap"
        return [("not_actuated", f"the gate of {instance.name} takes gate_cap only, not {what}")]
    refusals: list[Refusal] = []
    if frozen:
        refusals.append(("frozen", f"{frozen}: the cap holds"))
    if in_flight:
        refusals.append(("in_flight", f"{in_flight}: the cap holds"))
    cap = request.changes[GATE_CAP_KNOB]
    max_cap = request.current.get(MAX_NUM_SEQS)
    if max_cap is None:
        why = f"max-num-seqs of {instance.name} is not known: no cap is safe"
        return [*refusals, ("unknown_current_value", why)]
    # The step is free (any cap inside the envelope), so the "current" value is the cap itself.
    for problem in envelope_problems(GATE_CAP_KNOB, cap_envelope(max_cap), cap, cap, kind=int):
        refusals.append(("envelope", f"{problem} (max-num-seqs {max_cap:g})"))
    return refusals
