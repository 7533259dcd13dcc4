"""A tune policy's what-if, from its ``tune`` decision to an ordinary intent (or a reason not to).

Pure. :func:`question_of_tune` turns the question a ``tune`` decision carries into the
what-if's :class:`~daemon.whatif.requests.Question` (candidates within one ``max_step``, so
that the planner moves to the pick exactly); :func:`tuned_decision` turns the round's report
into an ``intent`` for the planner (the pick, with its counterfactual in the details), or a
``blocked`` decision: ``no_gain`` when no candidate is predicted to win ``min_gain``.
:func:`counterfactual` is what travels with the proposal: the predicted SLO attainment and
goodput now and after, the restart's cost, and the workload they are based on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from daemon.policy.decisions import Decision, DecisionKind
from daemon.whatif.planning import Objective, WhatIfReport, gain
from daemon.whatif.prediction import Prediction, Slo
from daemon.whatif.requests import DEFAULT_PROFILE, Question
from daemon.whatif.summary import LengthSummary

NO_GAIN = "no_gain"
"""The guard of a round whose best candidate is predicted to gain less than ``min_gain``."""

WHATIF_FAILED = "whatif_failed"
"""The guard of a round that could not be run (too little data, a worker past its bound)."""

UNSETTLED = "unsettled"
"""The guard of a round not run while its target's last change settles: a tuned change not yet
measured, or any change more recent than the round's window, which would then describe two
settings at once."""

_SHOWN_CANDIDATES = 5


def question_of_tune(tune: Mapping[str, Any]) -> Question:
    """The what-if question of a ``tune`` decision's details (``tune``)."""
    objective: Objective = "slo_attainment" if tune["objective"] == "slo_attainment" else "goodput"
    return Question(
        profile=tune.get("profile") or DEFAULT_PROFILE,
        slo=Slo(ttft_s=float(tune["ttft_slo_s"]), tpot_s=float(tune["tpot_slo_s"])),
        min_gain=float(tune["min_gain"]),
        objective=objective,
        knobs=tuple(tune["knobs"]),
        one_step=True,
    )


def tuned_decision(decision: Decision, report: WhatIfReport) -> Decision:
    """The ``tune`` decision answered: an intent to move to the pick, or blocked ``no_gain``."""
    assert decision.intent is not None
    facts = counterfactual(report, float(decision.details["tune"].get("max_error", 0.30)))
    if report.pick is None:
        return dataclasses.replace(
            decision,
            kind=DecisionKind.BLOCKED,
            guard=NO_GAIN,
            details={"reason": report.reason, "whatif": facts},
        )
    picked = report.pick.as_knobs()
    current = decision.intent.current
    changes = {knob: float(picked[knob]) for knob in current if picked[knob] != current[knob]}
    intent = dataclasses.replace(decision.intent, changes=changes)
    return dataclasses.replace(
        decision, kind=DecisionKind.INTENT, intent=intent, details={"whatif": facts}
    )


def unsettled_decision(decision: Decision, why: str) -> Decision:
    """The ``tune`` decision whose round waits for the target's last change to settle."""
    return dataclasses.replace(
        decision, kind=DecisionKind.BLOCKED, guard=UNSETTLED, details={"reason": why}
    )


def failed_decision(decision: Decision, why: str) -> Decision:
    """The ``tune`` decision whose round could not be run: blocked, with why."""
    return dataclasses.replace(
        decision, kind=DecisionKind.BLOCKED, guard=WHATIF_FAILED, details={"reason": why}
    )


def counterfactual(report: WhatIfReport, max_error: float = 0.30) -> dict[str, Any]:
    """The prediction a proposal carries (JSON-ready): now, after, the restart, the workload.

    ``after`` is the pick's prediction, or the best candidate's when nothing is picked; the
    candidates are the best few, for ``explain``. ``max_error`` is the policy's: the realised
    effect is judged against it later.
    """
    request = report.request
    best = next((p for p in report.ranked if p.setting == report.pick), report.ranked[0])
    summary = request.summary
    return {
        "objective": request.objective,
        "min_gain": request.min_gain,
        "max_error": max_error,
        "predicted_gain": round(gain(best, report.current, request.objective), 4),
        "now": _outcome(report.current),
        "after": _outcome(best),
        "restart": {
            "downtime_s": round(best.restart_downtime_s, 1),
            "requests_lost": round(best.requests_lost_to_restart, 1),
        },
        "workload": {
            "window_s": round(summary.window_s, 1),
            "rate_rps": round(summary.rate_rps, 3),
            "prompt_tokens": _percentiles(summary.prompt),
            "output_tokens": _percentiles(summary.output),
        },
        "profile": request.profile,
        "slo": {"ttft_s": request.slo.ttft_s, "tpot_s": request.slo.tpot_s},
        "reason": report.reason,
        "candidates": [p.to_json() for p in report.ranked[:_SHOWN_CANDIDATES]],
        "cpu_s": round(report.cpu_s, 2),
    }


def _outcome(prediction: Prediction) -> dict[str, Any]:
    return {
        **prediction.setting.as_knobs(),
        "slo_attainment": round(prediction.slo_attainment, 4),
        "goodput_rps": round(prediction.goodput_rps, 4),
    }


def _percentiles(lengths: LengthSummary) -> dict[str, float]:
    return {"p50": round(lengths.p50), "p90": round(lengths.p90), "p99": round(lengths.p99)}
