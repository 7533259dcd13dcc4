"""A tune policy's round: its question, and its report turned into an intent or a block (issue 16).

The code-like case of the issue (long prompts, short outputs, a 50 ms TPOT objective) on the
8B profile: a smaller token budget is predicted to win, so the round becomes an intent to move
there, carrying the prediction; a light workload, or a ``min_gain`` above what the best
candidate wins, is never a change.
"""

from __future__ import annotations

import math

import pytest

from daemon.core.settings import Envelope, VllmInstance
from daemon.policy.decisions import Decision, DecisionKind, Evidence, Intent
from daemon.whatif.candidates import Setting, within_one_step
from daemon.whatif.lognormal_fit import LogNormal
from daemon.whatif.planning import PlanRequest, WhatIfReport, plan
from daemon.whatif.prediction import Slo
from daemon.whatif.requests import plan_request
from daemon.whatif.summary import LengthSummary, WorkloadSummary
from daemon.whatif.tuning import NO_GAIN, question_of_tune, tuned_decision
from simulator.synthetic_workloads import Z90

PROFILE = "llama-3.1-8b-h100-tp1"
DEFAULTS = Setting(1024, 8192)
CANDIDATES = (DEFAULTS, Setting(1024, 2048), Setting(1024, 4096))
# What a ``tune`` decision carries (daemon.policy.evaluate.tune_question).
TUNE = {
    "knobs": ["max_num_seqs", "max_num_batched_tokens"],
    "objective": "goodput",
    "min_gain": 0.10,
    "window_s": 600.0,
    "profile": None,
    "ttft_slo_s": 2.0,
    "tpot_slo_s": 0.050,
}


def _lengths(median: float, p90: float, top: int) -> LengthSummary:
    fit = LogNormal(math.log(median), math.log(p90 / median) / Z90)
    return LengthSummary(1000, fit.mean, median, p90, p90 * 1.5, fit, top)


def _summary(rate: float, prompt: tuple[float, float]) -> WorkloadSummary:
    return WorkloadSummary(
        instance="main",
        window_s=600,
        scrapes=300,
        rate_rps=rate,
        count_cv=0.25,
        arrival_cv=1.0,
        scrape_interval_s=2.0,
        prompt=_lengths(*prompt, top=16_000),
        output=_lengths(60, 150, top=4_000),
    )


def _report(rate: float, *, min_gain: float = 0.10, objective: str = "goodput") -> WhatIfReport:
    return plan(
        PlanRequest(
            summary=_summary(rate, (4000, 8800) if rate > 4 else (500, 1200)),
            profile=PROFILE,
            current=DEFAULTS,
            candidates=CANDIDATES,
            slo=Slo(ttft_s=2.0, tpot_s=0.050),
            simulated_s=120,
            min_gain=min_gain,
            objective="slo_attainment" if objective == "slo_attainment" else "goodput",
        )
    )


def _due() -> Decision:
    current = {"max_num_seqs": 1024.0, "max_num_batched_tokens": 8192.0}
    return Decision(
        policy="tpot-tune",
        target="main",
        at=100.0,
        kind=DecisionKind.TUNE,
        evidence=Evidence("tpot_p95_s > 0.05", {"tpot_p95_s": 0.15}, 120.0),
        intent=Intent({}, current, None, "approval"),
        details={"tune": TUNE},
    )


@pytest.fixture(scope="module")
def code_like() -> WhatIfReport:
    return _report(8.0)


def test_a_round_that_wins_becomes_an_intent_to_the_pick_carrying_its_prediction(
    code_like: WhatIfReport,
) -> None:
    tuned = tuned_decision(_due(), code_like)

    assert code_like.pick is not None
    assert tuned.kind is DecisionKind.INTENT
    assert tuned.intent is not None
    # Only the knobs that move; the one already where the pick wants it drops out.
    assert tuned.intent.changes == {"max_num_batched_tokens": code_like.pick.max_num_batched_tokens}
    assert tuned.intent.current == _due().intent.current  # type: ignore[union-attr]
    assert tuned.intent.risk == "approval"
    facts = tuned.details["whatif"]
    assert facts["now"]["max_num_batched_tokens"] == 8192
    assert facts["after"]["max_num_batched_tokens"] == code_like.pick.max_num_batched_tokens
    assert facts["after"]["goodput_rps"] > facts["now"]["goodput_rps"]
    assert facts["after"]["slo_attainment"] > facts["now"]["slo_attainment"]
    assert facts["predicted_gain"] >= 0.10
    assert facts["restart"]["downtime_s"] > 0
    assert facts["restart"]["requests_lost"] > 0
    assert facts["workload"]["rate_rps"] == 8.0
    assert facts["workload"]["prompt_tokens"]["p50"] == 4000
    assert facts["workload"]["window_s"] == 600
    assert (
        facts["candidates"][0]["max_num_batched_tokens"] == facts["after"]["max_num_batched_tokens"]
    )


def test_a_round_whose_best_gains_less_than_min_gain_is_blocked_never_proposed() -> None:
    greedy = _report(8.0, min_gain=0.99)

    tuned = tuned_decision(_due(), greedy)

    assert greedy.pick is None
    assert tuned.kind is DecisionKind.BLOCKED
    assert tuned.guard == NO_GAIN
    assert "less than the 99% a change must win" in tuned.details["reason"]
    assert tuned.details["whatif"]["predicted_gain"] < 0.99


def test_a_setting_that_serves_everything_is_kept() -> None:
    tuned = tuned_decision(_due(), _report(2.0))

    assert tuned.kind is DecisionKind.BLOCKED
    assert tuned.guard == NO_GAIN
    assert tuned.details["reason"].startswith("keep")


def test_slo_attainment_gains_are_points_of_attainment(code_like: WhatIfReport) -> None:
    report = _report(8.0, objective="slo_attainment", min_gain=0.05)

    assert report.pick == code_like.pick  # the same arrivals: the same ranking
    facts = tuned_decision(_due(), report).details["whatif"]
    points = facts["after"]["slo_attainment"] - facts["now"]["slo_attainment"]
    # The gain is counted in points, the restart's lost requests as misses: a little less.
    assert 0 < facts["predicted_gain"] <= points
    assert "points" in report.reason


def test_a_tune_question_asks_for_one_step_candidates_of_its_knobs_only() -> None:
    question = question_of_tune({**TUNE, "knobs": ["max_num_batched_tokens"]})
    instance = VllmInstance.model_validate(
        {
            "name": "main",
            "url": "http://127.0.0.1:9",
            "knobs": {
                "max_num_seqs": {"min": 16, "max": 1024, "max_step": 512},
                "max_num_batched_tokens": {"min": 512, "max": 8192, "max_step": 4096},
            },
        }
    )
    in_force = {"max_num_seqs": 1024.0, "max_num_batched_tokens": 8192.0}

    request, _ = plan_request(instance, _summary(8.0, (4000, 8800)), None, in_force, question)

    assert question.one_step
    assert question.slo == Slo(ttft_s=2.0, tpot_s=0.050)
    assert {c.max_num_seqs for c in request.candidates} == {1024}
    assert {c.max_num_batched_tokens for c in request.candidates} == {4096, 8192}
    step = {"max_num_batched_tokens": Envelope(min=512, max=8192, max_step=4096)}
    assert within_one_step(Setting(1024, 4096), DEFAULTS, step)
    assert not within_one_step(Setting(1024, 2048), DEFAULTS, step)
