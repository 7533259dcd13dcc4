"""Ranking candidates by predicted goodput, the restart's cost included (issue 16).

The issue's case: code-like traffic (long prompts, short outputs) on the 8B profile, where the
defaults' 8,192-token steps put a large prefill chunk into most decode steps and TPOT, not
TTFT, is what misses the SLO. A smaller token budget must win there; where the setting in
force serves everything, nothing may be picked (a restart costs and buys nothing).
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from daemon.core.settings import Envelope
from daemon.whatif.candidates import Setting, candidate_grid, knob_values
from daemon.whatif.characterisation import StepObservations
from daemon.whatif.lognormal_fit import LogNormal
from daemon.whatif.planning import PlanRequest, _pick, plan
from daemon.whatif.prediction import Prediction, Slo, predict
from daemon.whatif.summary import LengthSummary, WorkloadSummary
from daemon.whatif.synthesis import synthesise
from simulator.profiles import load_profile
from simulator.settings import EngineSettings
from simulator.synthetic_workloads import Z90

PROFILE = "llama-3.1-8b-h100-tp1"
DEFAULTS = Setting(1024, 8192)
ENVELOPES = {
    "max_num_seqs": Envelope(min=16, max=1024, max_step=512),
    "max_num_batched_tokens": Envelope(min=512, max=8192, max_step=4096),
}

NARROW = {
    "max_num_seqs": Envelope(min=128, max=512, max_step=256),
    "max_num_batched_tokens": Envelope(min=2048, max=8192, max_step=4096),
}


def _lengths(median: float, p90: float, top: int) -> LengthSummary:
    fit = LogNormal(math.log(median), math.log(p90 / median) / Z90)
    return LengthSummary(1000, fit.mean, median, p90, p90 * 1.5, fit, top)


def _summary(
    rate: float, prompt: tuple[float, float], output: tuple[float, float]
) -> WorkloadSummary:
    return WorkloadSummary(
        instance="main",
        window_s=600,
        scrapes=300,
        rate_rps=rate,
        count_cv=0.25,
        arrival_cv=1.0,
        scrape_interval_s=2.0,
        prompt=_lengths(*prompt, top=16_000),
        output=_lengths(*output, top=4_000),
    )


def test_tpot_bound_by_prefill_interference_picks_a_smaller_token_budget() -> None:
    code_like = _summary(8.0, (4000, 8800), (60, 150))
    request = PlanRequest(
        summary=code_like,
        profile=PROFILE,
        current=DEFAULTS,
        candidates=tuple(candidate_grid(DEFAULTS, ENVELOPES)),
        slo=Slo(ttft_s=2.0, tpot_s=0.050),
        simulated_s=300,
    )

    report = plan(request)

    assert report.pick is not None
    assert report.pick.max_num_batched_tokens < DEFAULTS.max_num_batched_tokens
    best = report.ranked[0]
    assert best.setting == report.pick
    # TPOT was the binding limit, and the smaller budget is what relieves it.
    assert report.current.tpot_p95_s is not None
    assert best.tpot_p95_s is not None
    assert best.tpot_p95_s < report.current.tpot_p95_s
    assert best.objective >= 1.10 * report.current.objective
    # The restart is priced: the pick pays its downtime, the setting in force pays none.
    assert best.restart_downtime_s > 0
    assert best.requests_lost_to_restart > 0
    assert best.objective < best.goodput_rps
    assert report.current.objective == report.current.goodput_rps


def test_a_setting_that_serves_everything_is_kept() -> None:
    light = _summary(2.0, (500, 1200), (60, 150))
    request = PlanRequest(
        summary=light,
        profile=PROFILE,
        current=Setting(256, 4096),
        candidates=tuple(candidate_grid(Setting(256, 4096), NARROW)),
        simulated_s=120,
    )

    report = plan(request)

    assert report.current.slo_attainment == 1.0
    assert report.pick is None
    assert report.reason.startswith("keep")


def test_the_grid_is_the_envelopes_powers_of_two_bounds_and_the_value_in_force() -> None:
    envelope = Envelope(min=12, max=100, max_step=10)
    assert knob_values(48, envelope) == [12, 16, 32, 48, 64, 100]
    assert knob_values(48, None) == [48]
    wide = knob_values(256, Envelope(min=1, max=65536, max_step=1))
    assert len(wide) <= 9
    assert {1, 256, 65536} <= set(wide)
    grid = candidate_grid(Setting(64, 2048), {"max_num_seqs": envelope})
    assert {s.max_num_batched_tokens for s in grid} == {2048}
    assert Setting(64, 2048) in grid


def test_a_larger_cap_that_never_binds_is_priced_not_rerun_and_predicts_the_same() -> None:
    light = _summary(2.0, (500, 1200), (60, 150))
    request = PlanRequest(
        summary=light,
        profile=PROFILE,
        current=Setting(256, 4096),
        candidates=tuple(candidate_grid(Setting(256, 4096), NARROW)),
        simulated_s=120,
    )
    report = plan(request)
    reused = next(p for p in report.ranked if p.setting == Setting(512, 4096))

    profile = load_profile(PROFILE)
    base = EngineSettings.defaults(profile, max_num_seqs=256, max_num_batched_tokens=4096)
    direct = predict(
        profile,
        base,
        Setting(512, 4096),
        synthesise(light, 120, 0),
        duration_s=120,
        slo=Slo(),
        horizon_s=request.horizon_s,
        current=False,
    )

    assert reused.peak_in_engine < 128  # the smallest cap of the grid never bound
    assert reused == direct


def _predicted(setting: Setting, objective: float, *, current: bool) -> Prediction:
    return Prediction(
        setting=setting,
        current=current,
        requests=600,
        arrival_rps=2.0,
        slo_attainment=objective / 2.0,
        goodput_rps=objective,
        goodput_tok_s=objective * 100,
        ttft_p95_s=0.5,
        tpot_p95_s=0.03,
        preemptions=0,
        peak_in_engine=40,
        restart_downtime_s=0.0 if current else 60.0,
        requests_lost_to_restart=0.0 if current else 120.0,
        objective=objective,
    )


def test_no_change_is_picked_that_is_not_predicted_to_win_even_with_min_gain_zero() -> None:
    # No harm (issue 16): a candidate that ties the setting in force (ranked first by a
    # tie-break) or loses to it is never picked, whatever the policy's min_gain allows.
    now = _predicted(Setting(256, 4096), 1.8, current=True)
    for objective in ("goodput", "slo_attainment"):
        for rival in (1.8, 1.79):
            best = _predicted(Setting(512, 4096), rival, current=False)
            pick, reason = _pick(best, now, 0.0, objective)
            assert pick is None, (objective, rival, reason)
            assert reason.startswith("keep")
    winner = _predicted(Setting(512, 4096), 1.9, current=False)
    assert _pick(winner, now, 0.0)[0] == Setting(512, 4096)


def test_a_server_twice_as_slow_as_its_profile_is_planned_on_the_refit_profile() -> None:
    """The check's refit is what the round plans on: the setting in force is predicted slower.

    (Not exactly twice the TPOT: the prediction reads quantiles from vLLM's histogram buckets,
    as the live check of the change will, and interpolates inside them.)
    """
    # A light load (1 request a second), so that slower steps do not also make longer queues.
    code_like = _summary(1.0, (4000, 8800), (60, 150))
    asked = PlanRequest(
        summary=code_like,
        profile=PROFILE,
        current=DEFAULTS,
        candidates=(DEFAULTS,),
        slo=Slo(ttft_s=2.0, tpot_s=0.050),
        simulated_s=300,
    )
    profile = load_profile(PROFILE)
    # Steps of the profile's own mix, half as many a second as it could make with work all the
    # time: the server's steps take twice as long.
    prefill, decode, running = 1100, 18, 26.4
    context = running * (code_like.prompt.mean + code_like.output.mean / 2)
    steps_per_s = 0.5 / profile.step_time_s(prefill, decode, round(context))
    steps = StepObservations(
        window_s=600.0,
        steps_per_s=steps_per_s,
        tokens_per_step=prefill + decode,
        prompt_tokens_per_s=prefill * steps_per_s,
        generation_tokens_per_s=decode * steps_per_s,
        mean_running=running,
        busy_share=1.0,
    )

    as_named = plan(asked)
    refit = plan(replace(asked, steps=steps))

    assert as_named.profile_check.refit_scale is None
    assert refit.profile_check.verdict == "disagrees"
    assert refit.profile_check.refit_scale == pytest.approx(2.0, rel=0.01)
    named_tpot, refit_tpot = as_named.current.tpot_p95_s, refit.current.tpot_p95_s
    assert named_tpot is not None
    assert refit_tpot is not None
    assert refit_tpot > 1.3 * named_tpot
    assert refit.current.slo_attainment <= as_named.current.slo_attainment
