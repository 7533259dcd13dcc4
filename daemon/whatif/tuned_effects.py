"""Tuned changes awaiting their measurement, and the ``realised`` decision that ends the wait.

Pure. :class:`EffectWatch` remembers each tuned intent handed on (to approval or applied), sees
when the knobs in force read back as its pick, and says when the restart and a window as long
as the round's have passed since; :func:`realised_decision` compares the measurement with the
prediction (:mod:`daemon.whatif.realised`) and says whether the policy should be quarantined.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daemon.policy.decisions import Decision, DecisionKind, Evidence
from daemon.whatif.prediction import Slo
from daemon.whatif.realised import Realised, comparable, prediction_error

GIVE_UP_S = 86_400.0
"""A tuned change not in force a day after it was proposed is no longer awaited."""

CHANNELS = ("mqtt",)
"""Where the realised effect is told as a notification (Slack hears it in the proposal's
thread instead)."""


@dataclass(frozen=True, slots=True)
class Expected:
    """A tuned change and what it was predicted to do.

    Attributes:
        policy: The tune policy.
        target: The instance.
        after: Knob -> the value the change sets.
        forecast: The counterfactual the intent carried (``whatif`` details).
        window_s: The window to measure over (the round's).
        slo: The objectives a request must meet.
        max_error: The largest goodput error tolerated before a quarantine.
        since: When it was handed on (loop clock).
        in_force_at: When the knobs first read back as ``after`` (None: not yet).
    """

    policy: str
    target: str
    after: Mapping[str, float]
    forecast: Mapping[str, Any]
    window_s: float
    slo: Slo
    max_error: float
    since: float
    in_force_at: float | None = None

    @property
    def downtime_s(self) -> float:
        """The restart's predicted downtime, waited out before the window starts."""
        return float(self.forecast["restart"]["downtime_s"])


class EffectWatch:
    """The tuned changes awaited, one per (policy, target): the newest replaces an older one."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], Expected] = {}

    def expect(self, decision: Decision, now: float) -> None:
        """Await the effect of an accepted tuned intent (one without ``whatif`` is ignored)."""
        facts = decision.details.get("whatif")
        if decision.intent is None or facts is None:
            return
        slo = facts["slo"]
        self._waiting[(decision.policy, decision.target)] = Expected(
            policy=decision.policy,
            target=decision.target,
            after=dict(decision.intent.changes),
            forecast=facts,
            window_s=float(facts["workload"]["window_s"]),
            slo=Slo(ttft_s=float(slo["ttft_s"]), tpot_s=float(slo["tpot_s"])),
            max_error=float(facts.get("max_error", 0.30)),
            since=now,
        )

    def waiting(self) -> list[Expected]:
        """What is awaited now."""
        return list(self._waiting.values())

    def due(self, knobs: Mapping[str, Mapping[str, float]], now: float) -> list[Expected]:
        """The changes to measure now; they are no longer awaited.

        A change comes into force when its target's knobs read back as its values; it is due
        once its restart's downtime and its window have passed since. One whose knobs moved
        elsewhere after it came into force (reverted, changed again) is dropped unmeasured, as
        is one never in force within :data:`GIVE_UP_S` (rejected, expired).
        """
        due: list[Expected] = []
        for key, expected in list(self._waiting.items()):
            in_force = knobs.get(expected.target, {})
            matches = all(in_force.get(knob) == value for knob, value in expected.after.items())
            if expected.in_force_at is None:
                if matches:
                    self._waiting[key] = dataclasses.replace(expected, in_force_at=now)
                elif now - expected.since > GIVE_UP_S:
                    del self._waiting[key]
                continue
            if not matches:
                del self._waiting[key]
                continue
            if now - expected.in_force_at >= expected.downtime_s + expected.window_s:
                del self._waiting[key]
                due.append(expected)
        return due


def realised_decision(expected: Expected, realised: Realised, now: float) -> Decision:
    """The ``realised`` decision: predicted against realised, the error, and any quarantine."""
    after = expected.forecast["after"]
    predicted_rate = float(expected.forecast["workload"]["rate_rps"])
    error = prediction_error(float(after["slo_attainment"]), realised)
    not_comparable = comparable(predicted_rate, realised)
    quarantined = not_comparable is None and abs(error) > expected.max_error
    change = ", ".join(f"{knob} {value:g}" for knob, value in sorted(expected.after.items()))
    told = (
        f"{expected.policy} on {expected.target}: {change} realised SLO attainment"
        f" {realised.slo_attainment:.1%} (predicted {float(after['slo_attainment']):.1%}),"
        f" goodput {realised.goodput_rps:.2f} req/s at {realised.workload.rate_rps:.2f} req/s"
        f" (predicted {float(after['goodput_rps']):.2f} at {predicted_rate:.2f});"
        f" goodput error {error:+.0%}"
    )
    if not_comparable is not None:
        told += f"; not comparable, no verdict: {not_comparable}"
    why = ""
    if quarantined:
        why = (
            f"its prediction missed: goodput error {error:+.0%} beyond the {expected.max_error:.0%}"
            f" allowed (realised SLO attainment {realised.slo_attainment:.1%}, predicted"
            f" {float(after['slo_attainment']):.1%})"
        )
        told += f"; {expected.policy} is quarantined on {expected.target}: {why}"
    return Decision(
        policy=expected.policy,
        target=expected.target,
        at=now,
        kind=DecisionKind.REALISED,
        evidence=Evidence(f"realised effect of {change}", {}, now - expected.since, told),
        details={
            "predicted": {"now": expected.forecast["now"], "after": after},
            "realised": realised.to_json(),
            "goodput_error": round(error, 4),
            "max_error": expected.max_error,
            "comparable": not_comparable is None,
            "not_comparable": not_comparable,
            "quarantined": quarantined,
            "why": why,
            "text": told,
            "channels": list(CHANNELS),
        },
    )
