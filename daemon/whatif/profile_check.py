"""Does the engine profile's step time match the server's live step rate?

The profile predicts one step's duration from what the step holds
(:meth:`simulator.profiles.EngineProfile.step_time_s`). vLLM's metrics give, over the window, the
steps per second (``iteration_tokens`` count rate), the prefill and decode tokens per second,
and how many requests were running. Spread over the steps, those make the mean step's mix; the
profile's time for that step times the step rate is the compute the profile says the server
did per second. An engine runs its steps back to back while it has work, so that should be
about the share of the time it had work (the share of scrapes with a request running).

* Within ``[1 / TOLERANCE, TOLERANCE]`` of it: the profile agrees.
* Outside: it disagrees, and the report says by how much and which way. A what-if on a
  profile that disagrees predicts another server; the answer still comes, with the warning.
* Mostly idle (requests running at under half of the scrapes): steps are few and short, and
  the share measured at scrapes is rough, so only an impossible profile (more compute than
  the time there was) is a disagreement.

The context term takes each running request's context as its prompt plus half its output (the
mean over its decode).

**Refit.** Where a busy server disagrees, the what-if plans on the profile refit to it: its step
coefficients (fixed, prefill, decode and context costs) scaled by one factor, the observed busy
share over the predicted one, so that the profile's mean step takes as long as the server's. A
window gives one mean step, so one factor is all it can fit; the ratios between the costs (what
makes a prefill-heavy step slower than a decode-heavy one) stay the profile's. A mostly idle
server is not refit: the share measured at scrapes is too rough to scale by.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, TypedDict

from daemon.whatif.characterisation import StepObservations
from daemon.whatif.summary import WorkloadSummary
from simulator.profiles import EngineProfile

TOLERANCE = 1.25
_MOSTLY_IDLE = 0.5


class _Figures(TypedDict):
    steps_per_s: float
    observed_busy_share: float
    predicted_step_s: float
    predicted_busy_share: float
    prefill_tokens_per_step: float
    decode_tokens_per_step: float
    context_tokens_per_step: float


@dataclass(frozen=True, slots=True)
class ProfileCheck:
    """The verdict, and the numbers it rests on (None where unknown)."""

    profile: str
    verdict: str  # "agrees", "disagrees" or "unknown"
    reason: str
    steps_per_s: float | None = None
    observed_busy_share: float | None = None
    predicted_step_s: float | None = None
    predicted_busy_share: float | None = None
    prefill_tokens_per_step: float | None = None
    decode_tokens_per_step: float | None = None
    context_tokens_per_step: float | None = None
    refit_scale: float | None = None  # the factor on the step costs; None: not refit
    refit_profile: EngineProfile | None = None  # the profile refit by it, planned on

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping; ``refit`` is the scale and the refit costs, or None."""
        numbers = {
            "steps_per_s": self.steps_per_s,
            "observed_busy_share": self.observed_busy_share,
            "predicted_step_s": self.predicted_step_s,
            "predicted_busy_share": self.predicted_busy_share,
            "prefill_tokens_per_step": self.prefill_tokens_per_step,
            "decode_tokens_per_step": self.decode_tokens_per_step,
            "context_tokens_per_step": self.context_tokens_per_step,
        }
        return {
            "profile": self.profile,
            "verdict": self.verdict,
            "reason": self.reason,
            **{key: None if value is None else round(value, 4) for key, value in numbers.items()},
            "refit": self._refit_json(),
        }

    def _refit_json(self) -> dict[str, Any] | None:
        if self.refit_scale is None or self.refit_profile is None:
            return None
        fitted = self.refit_profile
        return {
            "scale": round(self.refit_scale, 4),
            "profile": fitted.name,
            "beta0_us": round(fitted.beta0_us, 3),
            "beta1_us_per_prefill_token": round(fitted.beta1_us_per_prefill_token, 5),
            "beta2_us_per_decode_token": round(fitted.beta2_us_per_decode_token, 5),
            "beta3_us_per_context_token": round(fitted.beta3_us_per_context_token, 6),
        }


def refit(profile: EngineProfile, scale: float) -> EngineProfile:
    """``profile`` with its step costs times ``scale`` (see the module docstring)."""
    return profile.model_copy(
        update={
            "name": f"{profile.name} (steps x{scale:.2f})",
            "beta0_us": profile.beta0_us * scale,
            "beta1_us_per_prefill_token": profile.beta1_us_per_prefill_token * scale,
            "beta2_us_per_decode_token": profile.beta2_us_per_decode_token * scale,
            "beta3_us_per_context_token": profile.beta3_us_per_context_token * scale,
        }
    )


def check_profile(
    profile: EngineProfile, steps: StepObservations | None, summary: WorkloadSummary
) -> ProfileCheck:
    """Compare the profile's step time with the live step rate (see the module docstring)."""
    if steps is None or steps.steps_per_s <= 0:
        reason = "no engine steps in the window (vllm:iteration_tokens_total missing or idle)"
        return ProfileCheck(profile.name, "unknown", reason)
    prefill = steps.prompt_tokens_per_s / steps.steps_per_s
    decode = steps.generation_tokens_per_s / steps.steps_per_s
    context = steps.mean_running * (summary.prompt.mean + summary.output.mean / 2)
    step_s = profile.step_time_s(round(prefill), round(decode), round(context))
    predicted = steps.steps_per_s * step_s
    observed = steps.busy_share
    numbers: _Figures = {
        "steps_per_s": steps.steps_per_s,
        "observed_busy_share": observed,
        "predicted_step_s": step_s,
        "predicted_busy_share": predicted,
        "prefill_tokens_per_step": prefill,
        "decode_tokens_per_step": decode,
        "context_tokens_per_step": context,
    }
    said = (
        f"{steps.steps_per_s:.1f} steps/s of {prefill:.0f} prefill + {decode:.0f} decode tokens:"
        f" the profile needs {step_s * 1000:.1f} ms a step, {predicted:.0%} of the time;"
        f" requests ran at {observed:.0%} of the scrapes"
    )
    if observed < _MOSTLY_IDLE:
        if predicted > TOLERANCE:
            verdict, why = "disagrees", "the profile is too slow for the steps the server made"
        else:
            verdict, why = "unknown", "mostly idle: only an impossible profile would show"
        return ProfileCheck(profile.name, verdict, f"{said}; {why}", **numbers)
    ratio = predicted / observed
    if 1 / TOLERANCE <= ratio <= TOLERANCE:
        return ProfileCheck(profile.name, "agrees", f"{said}; within {TOLERANCE:g}x", **numbers)
    way = "slower" if ratio > 1 else "faster"
    factor = ratio if ratio > 1 else 1 / ratio
    scale = 1 / ratio
    why = (
        f"the profile's steps are {factor:.2f}x {way} than the server's;"
        f" planned on it refit: step costs x{scale:.2f}"
    )
    checked = ProfileCheck(profile.name, "disagrees", f"{said}; {why}", **numbers)
    return replace(checked, refit_scale=scale, refit_profile=refit(profile, scale))
