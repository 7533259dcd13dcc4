"""Characterising a workload from vLLM's metrics, and synthesising it back (issue 16).

The round trip: a known synthetic workload (the simulator's generator) -> the counters and
length histograms a vLLM server would show -> :func:`characterise` -> the summary's rate, CV
and fitted lengths near the workload's own -> :func:`synthesise` -> lengths whose quantiles are
near the original's again.
"""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.whatif.characterisation import characterise, observe_steps
from daemon.whatif.errors import WhatIfError
from daemon.whatif.synthesis import synthesise
from simulator.profiles import load_profile
from simulator.settings import EngineSettings
from simulator.synthetic_workloads import GammaArrivals, LogNormalLengths, WorkloadSpec, generate
from tests.unit.whatif.metric_histories import INSTANCE, history
from tests.unit.whatif.scraped_runs import scraped_store

DURATION_S = 600.0


def _spec(
    rate: float, cv: float, prompt: tuple[float, float], output: tuple[float, float]
) -> WorkloadSpec:
    return WorkloadSpec(
        name="known",
        duration_s=DURATION_S,
        seed=3,
        arrivals=GammaArrivals(rate_rps=rate, cv=cv),
        prompt_tokens=LogNormalLengths(median=prompt[0], p90=prompt[1], max=100_000),
        output_tokens=LogNormalLengths(median=output[0], p90=output[1], max=100_000),
    )


def _near(value: float, truth: float, share: float) -> bool:
    return abs(value - truth) <= share * truth


@settings(max_examples=25, deadline=None)
@given(
    rate=st.floats(2.0, 30.0),
    cv=st.floats(0.5, 2.5),
    prompt_median=st.floats(20.0, 8000.0),
    prompt_spread=st.floats(1.3, 4.0),
    output_median=st.floats(5.0, 1000.0),
    output_spread=st.floats(1.3, 4.0),
)
def test_a_workload_survives_the_round_trip_through_its_metrics(
    rate: float,
    cv: float,
    prompt_median: float,
    prompt_spread: float,
    output_median: float,
    output_spread: float,
) -> None:
    prompt = (prompt_median, prompt_median * prompt_spread)
    output = (output_median, output_median * output_spread)
    arrivals = generate(_spec(rate, cv, prompt, output))
    summary = characterise(history(arrivals, DURATION_S), INSTANCE, DURATION_S, DURATION_S)

    assert _near(summary.rate_rps, rate, 0.15)
    assert _near(summary.arrival_cv, cv, 0.4)
    for lengths, (median, p90) in ((summary.prompt, prompt), (summary.output, output)):
        assert _near(lengths.fit.median, median, 0.15)
        assert _near(lengths.fit.p90, p90, 0.25)

    again = synthesise(summary, DURATION_S, seed=11)
    assert _near(len(again) / DURATION_S, rate, 0.2)
    assert _near(statistics.median(a.prompt_tokens for a in again), prompt[0], 0.2)
    assert _near(statistics.median(a.output_tokens for a in again), output[0], 0.2)


def test_the_summary_read_off_a_simulated_servers_pages_matches_its_workload() -> None:
    # The whole path: the simulated server's /metrics text, the vLLM source's parser, the store.
    profile = load_profile("llama-3.1-8b-h100-tp1")
    arrivals = generate(_spec(6.0, 1.0, (1500, 3300), (100, 250)))
    store = scraped_store(profile, EngineSettings.defaults(profile), arrivals, 300.0)

    summary = characterise(store, "main", 300.0, 300.0)
    steps = observe_steps(store, "main", 300.0, 300.0)

    assert _near(summary.rate_rps, 6.0, 0.15)
    assert _near(summary.prompt.fit.median, 1500, 0.15)
    assert _near(summary.output.fit.median, 100, 0.15)
    assert steps is not None
    assert steps.busy_share > 0.5
    assert _near(steps.prompt_tokens_per_s, 6.0 * summary.prompt.mean, 0.2)


def test_a_restart_in_the_window_is_a_counter_reset_not_an_error() -> None:
    arrivals = generate(_spec(10.0, 1.0, (500, 1200), (50, 120)))
    store = history(arrivals, DURATION_S, restart_at=300.0)

    summary = characterise(store, INSTANCE, DURATION_S, DURATION_S)

    assert _near(summary.rate_rps, 10.0, 0.15)


def test_too_few_requests_is_an_answer_not_a_guess() -> None:
    arrivals = generate(_spec(0.02, 1.0, (500, 1200), (50, 120)))
    with pytest.raises(WhatIfError, match="requests finished"):
        characterise(history(arrivals, DURATION_S), INSTANCE, DURATION_S, DURATION_S)


def test_a_server_without_length_histograms_is_told_so() -> None:
    arrivals = generate(_spec(5.0, 1.0, (500, 1200), (50, 120)))
    store = history(arrivals, DURATION_S)
    for key in store.keys("vllm_request_prompt_tokens_bucket"):
        store.forget(key)
    with pytest.raises(WhatIfError, match="request_prompt_tokens histogram is missing"):
        characterise(store, INSTANCE, DURATION_S, DURATION_S)
