"""The profile check: the profile's step time at the live step mix against the time with work.

The observations of the first case are what the 8B profile's own simulated server showed under
8 req/s of long prompts (bench/whatif_cost.py's code-like workload, scraped through the parser):
the same profile must agree with them, a slower one (the 70B) must not.
"""

from __future__ import annotations

import math

import pytest

from daemon.whatif.characterisation import StepObservations
from daemon.whatif.lognormal_fit import LogNormal
from daemon.whatif.profile_check import check_profile
from daemon.whatif.summary import LengthSummary, WorkloadSummary
from simulator.profiles import load_profile

SERVED_BY_8B = StepObservations(
    window_s=598.0,
    steps_per_s=35.0,
    tokens_per_step=1129.5,
    prompt_tokens_per_s=38_899.0,
    generation_tokens_per_s=631.6,
    mean_running=26.4,
    busy_share=1.0,
)
IDLE = StepObservations(600.0, 2.0, 300.0, 500.0, 100.0, 0.1, 0.1)


def _summary(prompt_mean: float, output_mean: float) -> WorkloadSummary:
    def lengths(mean: float) -> LengthSummary:
        return LengthSummary(
            1000, mean, mean, mean * 2, mean * 4, LogNormal(math.log(mean), 0.6), 10_000
        )

    return WorkloadSummary(
        "main", 600, 300, 8.0, 0.2, 1.0, 2.0, lengths(prompt_mean), lengths(output_mean)
    )


@pytest.mark.parametrize(
    ("profile", "steps", "verdict", "says"),
    [
        ("llama-3.1-8b-h100-tp1", SERVED_BY_8B, "agrees", "within 1.25x"),
        ("llama-3.3-70b-h100-tp4", SERVED_BY_8B, "disagrees", "slower than the server's"),
        ("llama-3.1-8b-h100-tp1", IDLE, "unknown", "mostly idle"),
        ("llama-3.1-8b-h100-tp1", None, "unknown", "no engine steps"),
    ],
)
def test_verdicts(profile: str, steps: StepObservations | None, verdict: str, says: str) -> None:
    check = check_profile(load_profile(profile), steps, _summary(4807.0, 78.0))

    assert check.verdict == verdict
    assert says in check.reason
    shown = check.to_json()
    # Only a busy server that disagrees is refit.
    assert (shown["refit"] is None) == (verdict != "disagrees")
    if steps is SERVED_BY_8B:
        assert shown["predicted_busy_share"] is not None
        assert shown["steps_per_s"] == 35.0


def test_a_busy_server_that_disagrees_is_planned_on_the_profile_refit_to_its_step_rate() -> None:
    # The 70B profile on the 8B's steps: its mean step at that mix takes far longer than the
    # server's, which made 35 a second with work all the time.
    slower = load_profile("llama-3.3-70b-h100-tp4")
    check = check_profile(slower, SERVED_BY_8B, _summary(4807.0, 78.0))

    assert check.refit_scale is not None
    assert check.refit_profile is not None
    assert check.refit_scale < 1 / 1.25  # the steps are scaled down, past the tolerance
    fitted = check.refit_profile
    mix = (
        round(check.prefill_tokens_per_step or 0),
        round(check.decode_tokens_per_step or 0),
        round(check.context_tokens_per_step or 0),
    )
    # Refit, the profile's mean step fills exactly the time the server had work.
    assert fitted.step_time_s(*mix) * SERVED_BY_8B.steps_per_s == pytest.approx(1.0, rel=1e-9)
    # One factor on every step cost; the rest of the profile (KV pool, restart) is its own.
    assert fitted.beta1_us_per_prefill_token / fitted.beta0_us == pytest.approx(
        slower.beta1_us_per_prefill_token / slower.beta0_us
    )
    assert (fitted.kv_blocks, fitted.restart_s) == (slower.kv_blocks, slower.restart_s)
    shown = check.to_json()["refit"]
    assert shown["scale"] == round(check.refit_scale, 4)
    assert shown["profile"] == f"llama-3.3-70b-h100-tp4 (steps x{check.refit_scale:.2f})"
    assert shown["beta0_us"] == round(fitted.beta0_us, 3)
    assert "planned on it refit" in check.reason
