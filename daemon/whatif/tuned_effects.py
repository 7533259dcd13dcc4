"""Tuned changes awaiting their measurement, and the ``realised`` decision that ends the wait.

Pure. :class:`EffectWatch` remembers each tuned intent handed on (to approval or applied), sees
when the knobs in force read back as its pick, and says when the restart and a window as long
as the round's have passed since; :func:`realised_decision` compares the measurement with the
prediction (:mod:`daemon.whatif.realised`) and says whether the policy should be quarantined.

What is awaited outlives the governor: every change of it goes to a ``kept`` port (the state
store), and a governor that starts again resumes it (:meth:`EffectWatch.resume`). The time it
was down was watched by no one, so, as a policy's timers (:meth:`PolicyState.restarted
<daemon.policy.state.PolicyState.restarted>`), a change's wait starts over from the first look
that finds it in force: its window never spans the gap, whose metrics the governor never saw.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
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

    def restarted(self) -> Expected:
        """What a governor that starts again awaits: the change, its wait started over.

        The time it was down counts toward no window: a change already in force is in force
        again from the first look that finds it so, and waits its downtime (when the server
        came up in the gap is unknown) and its window from there.
        """
        return dataclasses.replace(self, in_force_at=None)

    def to_json(self) -> dict[str, Any]:
        """What the state store keeps besides the times (which it shifts to the wall clock)."""
        return {
            "after": dict(self.after),
            "forecast": dict(self.forecast),
            "window_s": self.window_s,
            "slo": {"ttft_s": self.slo.ttft_s, "tpot_s": self.slo.tpot_s},
            "max_error": self.max_error,
        }

    @classmethod
    def from_json(
        cls,
        policy: str,
        target: str,
        raw: Mapping[str, Any],
        since: float,
        in_force_at: float | None,
    ) -> Expected:
        """Back from :meth:`to_json` and the times, on this run's loop clock."""
        slo = raw["slo"]
        return cls(
            policy=policy,
            target=target,
            after={knob: float(value) for knob, value in raw["after"].items()},
            forecast=raw["forecast"],
            window_s=float(raw["window_s"]),
            slo=Slo(ttft_s=float(slo["ttft_s"]), tpot_s=float(slo["tpot_s"])),
            max_error=float(raw["max_error"]),
            since=since,
            in_force_at=in_force_at,
        )


def _not_kept(_waiting: list[Expected]) -> None:
    """A watch that keeps nothing (one-off runs, tests of the watch alone)."""


class EffectWatch:
    """The tuned changes awaited, one per (policy, target): the newest replaces an older one."""

    def __init__(self, kept: Callable[[list[Expected]], None] = _not_kept) -> None:
        """``kept`` is told everything awaited after each change of it (the state store)."""
        self._waiting: dict[tuple[str, str], Expected] = {}
        self._kept = kept

    def resume(self, saved: Iterable[Expected]) -> None:
        """Await what a previous run awaited (not what this run awaits already), waits reset."""
        before = dict(self._waiting)
        for expected in saved:
            self._waiting.setdefault((expected.policy, expected.target), expected.restarted())
        self._keep_if_changed(before)

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
        self._kept(self.waiting())

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
        before = dict(self._waiting)
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
        self._keep_if_changed(before)
        return due

    def _keep_if_changed(self, before: Mapping[tuple[str, str], Expected]) -> None:
        # Most looks change nothing: they compare a few numbers and write nothing.
        if self._waiting != before:
            self._kept(self.waiting())


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
