from __future__ import annotations

import json

import pytest

from simulator.arrivals import Arrival
from simulator.engine import Engine
from simulator.profiles import EngineProfile
from simulator.report import build_report, meets_slo, percentile
from simulator.requests import FinishedRequest, Outcome
from simulator.settings import EngineSettings
from simulator.static_runs import simulate
from simulator.synthetic_workloads import WorkloadSpec, generate
from simulator.virtual_time import VirtualRun

ISSUE_KEYS = {
    "requests",
    "slo_attainment",
    "goodput_rps",
    "goodput_tok_s",
    "throughput_tok_s",
    "ttft_p50_s",
    "ttft_p95_s",
    "tpot_p50_s",
    "tpot_p95_s",
    "preemptions",
    "restarts",
    "downtime_s",
    "timeseries",
}

SPEC = WorkloadSpec.model_validate(
    {
        "name": "small",
        "duration_s": 60,
        "arrivals": {"rate_rps": 4.0, "cv": 1.5},
        "bursts": [{"start_s": 20, "duration_s": 10, "multiplier": 3}],
        "prompt_tokens": {"median": 1020, "p90": 2734, "max": 8192},
        "output_tokens": {"median": 129, "p90": 424, "max": 1000},
        "long_outputs": {"share": 0.1, "start_s": 30, "duration_s": 10},
    }
)


def test_the_same_seed_gives_the_same_report_byte_for_byte(profile_8b: EngineProfile) -> None:
    settings = EngineSettings.defaults(profile_8b, num_gpu_blocks=3000)

    def report(seed: int) -> str:
        return json.dumps(simulate(profile_8b, settings, generate(SPEC, seed), "small"))

    assert report(1) == report(1)
    assert report(1) != report(2)


def test_the_report_has_the_issues_keys_and_states_its_assumptions(
    profile_8b: EngineProfile,
) -> None:
    report = simulate(profile_8b, EngineSettings.defaults(profile_8b), generate(SPEC, 3), "small")
    assert set(report) >= ISSUE_KEYS | {"profile", "settings", "assumptions"}
    assert set(report["requests"]) == {"total", "completed", "aborted", "rejected"}
    assert report["requests"]["total"] == len(generate(SPEC, 3))
    assert report["profile"]["beta3_us_per_context_token"] == 0.04
    assert any("context term" in line for line in report["assumptions"])
    series = report["timeseries"]
    assert [point["t"] for point in series[:3]] == [1.0, 2.0, 3.0]
    assert {"running", "waiting", "kv_usage", "throughput_tok_s", "preemptions"} <= set(series[0])
    # The time series accounts for the tokens (all but the last, partial second).
    in_series = sum(point["throughput_tok_s"] for point in series)
    total = report["throughput_tok_s"] * report["duration_s"]
    assert in_series <= total
    assert in_series > 0.95 * total


def test_dropped_requests_are_misses_never_wins(profile_8b: EngineProfile) -> None:
    arrivals = [Arrival(i * 0.1, 200, 50) for i in range(1000)]
    run = VirtualRun(Engine(profile_8b, EngineSettings.defaults(profile_8b)), arrivals)
    run.run_until(5.0)
    run.restart()
    run.run()
    report = build_report(run, profile_8b, EngineSettings.defaults(profile_8b), "steady")
    requests = report["requests"]
    assert requests["aborted"] + requests["rejected"] > 0
    assert requests["total"] == 1000
    assert report["slo_attainment"] <= requests["completed"] / requests["total"]
    assert report["restarts"] == 1
    assert report["downtime_s"] == pytest.approx(profile_8b.restart_s)
    assert report["goodput_tok_s"] <= report["throughput_tok_s"]


def _record(outcome: Outcome, ttft: float | None, tpot: float | None) -> FinishedRequest:
    return FinishedRequest("r", 0.0, 1.0, 10, 10, outcome, ttft_s=ttft, tpot_s=tpot)


@pytest.mark.parametrize(
    ("record", "met"),
    [
        (_record(Outcome.COMPLETED, 2.0, 0.1), True),
        (_record(Outcome.COMPLETED, 2.01, 0.01), False),
        (_record(Outcome.COMPLETED, 0.1, 0.11), False),
        (_record(Outcome.COMPLETED, 0.1, None), True),
        (_record(Outcome.ABORTED, 0.1, 0.01), False),
        (_record(Outcome.REJECTED, None, None), False),
    ],
)
def test_the_slo_is_judged_per_request(record: FinishedRequest, met: bool) -> None:
    assert meets_slo(record) is met


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.95) == 95.0
    assert percentile([3.0], 0.95) == 3.0
    assert percentile([], 0.5) is None
