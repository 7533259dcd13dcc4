"""The counterfactual a tuned proposal carries: what the what-if predicted, now and after.

A proposal made from a tune policy's round carries its :class:`Forecast`: the predicted SLO
attainment and goodput with the setting in force and after the change, the restart's cost,
and the workload the prediction rests on (rate, prompt and output percentiles, window). The
Slack message, ``proposals`` and the audit log show it, so that a person approving a restart
knows what it should buy; after the change, the realised effect is measured against it.
It is read from the decision's ``whatif`` details (:func:`daemon.whatif.tuning.counterfactual`)
and stored with the proposal, as JSON, both ways exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daemon.approvals.errors import ProposalError
from daemon.approvals.wording import format_duration


@dataclass(frozen=True, slots=True)
class Outcome:
    """One setting's predicted service of the workload (before any restart's loss)."""

    slo_attainment: float
    goodput_rps: float


@dataclass(frozen=True, slots=True)
class Percentiles:
    """A length distribution's p50, p90 and p99, in tokens."""

    p50: float
    p90: float
    p99: float


@dataclass(frozen=True, slots=True)
class Forecast:
    """What the what-if predicted for a tuned change.

    Attributes:
        objective: ``goodput`` or ``slo_attainment``: what the candidates were ranked by.
        predicted_gain: The gain over the setting in force, the restart's loss included
            (relative for goodput, in points of attainment otherwise).
        now: The setting in force.
        after: The proposed setting, once restarted.
        restart_downtime_s: Seconds vLLM is predicted to be down for the restart.
        requests_lost: Requests predicted to arrive while it is down.
        window_s: The recent window the workload was characterised over.
        rate_rps: Its arrival rate.
        prompt_tokens: Its prompt lengths.
        output_tokens: Its output lengths.
        profile: The engine profile simulated.
    """

    objective: str
    predicted_gain: float
    now: Outcome
    after: Outcome
    restart_downtime_s: float
    requests_lost: float
    window_s: float
    rate_rps: float
    prompt_tokens: Percentiles
    output_tokens: Percentiles
    profile: str

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Forecast:
        """From :meth:`to_json`'s shape (also the decision's ``whatif`` details).

        Raises:
            ProposalError: ``raw`` is not such a mapping.
        """
        try:
            workload = raw["workload"]
            return cls(
                objective=str(raw["objective"]),
                predicted_gain=float(raw["predicted_gain"]),
                now=_outcome(raw["now"]),
                after=_outcome(raw["after"]),
                restart_downtime_s=float(raw["restart"]["downtime_s"]),
                requests_lost=float(raw["restart"]["requests_lost"]),
                window_s=float(workload["window_s"]),
                rate_rps=float(workload["rate_rps"]),
                prompt_tokens=_percentiles(workload["prompt_tokens"]),
                output_tokens=_percentiles(workload["output_tokens"]),
                profile=str(raw["profile"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            message = f"a what-if forecast cannot be read ({type(exc).__name__}: {exc})"
            raise ProposalError(message) from exc

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping (the shape :meth:`from_json` reads)."""
        return {
            "objective": self.objective,
            "predicted_gain": self.predicted_gain,
            "now": _outcome_json(self.now),
            "after": _outcome_json(self.after),
            "restart": {"downtime_s": self.restart_downtime_s, "requests_lost": self.requests_lost},
            "workload": {
                "window_s": self.window_s,
                "rate_rps": self.rate_rps,
                "prompt_tokens": _percentiles_json(self.prompt_tokens),
                "output_tokens": _percentiles_json(self.output_tokens),
            },
            "profile": self.profile,
        }

    def effect_text(self) -> str:
        """The predicted effect, for people: attainment and goodput, now → after."""
        return (
            f"predicted SLO attainment {self.now.slo_attainment:.1%} → "
            f"{self.after.slo_attainment:.1%}, goodput {self.now.goodput_rps:.2f} → "
            f"{self.after.goodput_rps:.2f} req/s ({self.gain_text()} after the restart's loss)"
        )

    def gain_text(self) -> str:
        """The predicted gain as people read it: ``+24.0%`` or ``+12.5 points``."""
        if self.objective == "slo_attainment":
            return f"{self.predicted_gain * 100:+.1f} points of attainment"
        return f"{self.predicted_gain:+.1%} goodput"

    def cost_text(self) -> str:
        """The restart's predicted cost, for people."""
        return (
            f"restarts vLLM: ~{format_duration(self.restart_downtime_s)} down, "
            f"~{self.requests_lost:.0f} requests lost"
        )

    def workload_text(self) -> str:
        """The workload the prediction rests on, in one line."""
        prompt, output = self.prompt_tokens, self.output_tokens
        return (
            f"{self.rate_rps:.2f} req/s over the last {format_duration(self.window_s)}; "
            f"prompt tokens p50/p90/p99 {prompt.p50:.0f}/{prompt.p90:.0f}/{prompt.p99:.0f}, "
            f"output tokens {output.p50:.0f}/{output.p90:.0f}/{output.p99:.0f}; "
            f"profile {self.profile}"
        )


def _outcome(raw: Mapping[str, Any]) -> Outcome:
    return Outcome(float(raw["slo_attainment"]), float(raw["goodput_rps"]))


def _outcome_json(outcome: Outcome) -> dict[str, float]:
    return {"slo_attainment": outcome.slo_attainment, "goodput_rps": outcome.goodput_rps}


def _percentiles(raw: Mapping[str, Any]) -> Percentiles:
    return Percentiles(float(raw["p50"]), float(raw["p90"]), float(raw["p99"]))


def _percentiles_json(lengths: Percentiles) -> dict[str, float]:
    return {"p50": lengths.p50, "p90": lengths.p90, "p99": lengths.p99}
