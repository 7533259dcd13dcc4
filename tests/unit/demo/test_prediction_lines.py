"""A tuned proposal's prediction and its measured effect, as the demo tells them (issue 16)."""

from __future__ import annotations

from typing import Any

from daemon.app.demo.narration import basis_line, forecast_line, realised_line
from daemon.app.demo.summary import busy_lines, render

FORECAST = {
    "objective": "goodput",
    "predicted_gain": 0.823,
    "now": {"slo_attainment": 0.473, "goodput_rps": 6.37},
    "after": {"slo_attainment": 0.866, "goodput_rps": 11.66},
    "restart": {"downtime_s": 13.0, "requests_lost": 175.0},
    "workload": {
        "window_s": 34.0,
        "rate_rps": 12.77,
        "prompt_tokens": {"p50": 1155, "p90": 3686, "p99": 7475},
        "output_tokens": {"p50": 133, "p90": 453, "p99": 922},
    },
    "profile": "llama-3.1-8b-h100-tp1",
}
TEXT = (
    "ttft-queue on main: max_num_batched_tokens 512 realised SLO attainment 98.1% (predicted "
    "86.6%), goodput 13.98 req/s at 14.25 req/s (predicted 11.66 at 12.77); goodput error +13%"
)


def test_a_proposal_with_a_forecast_is_told_with_its_prediction() -> None:
    line = forecast_line({"id": "p1", "forecast": FORECAST})
    assert line is not None
    assert line.startswith("the what-if predicted SLO attainment 47.3% → 86.6%")
    assert "~175 requests lost" in line
    assert "from 12.77 req/s over the last 34 s" in line
    # A fixed-step proposal has no forecast; a broken one is not told rather than guessed.
    assert forecast_line({"id": "p2"}) is None
    assert forecast_line({"id": "p3", "forecast": {"now": {}}}) is None
    # The terminal's question shows the proposal's effect and cost (the prediction already)
    # and adds what it was computed from.
    assert basis_line({"id": "p1", "forecast": FORECAST}) == (
        "12.77 req/s over the last 34 s; prompt tokens p50/p90/p99 1155/3686/7475, output "
        "tokens 133/453/922; profile llama-3.1-8b-h100-tp1"
    )
    assert basis_line({"id": "p2"}) is None


def test_the_measured_effect_is_told_as_the_governor_recorded_it() -> None:
    decision = {"kind": "realised", "policy": "ttft-queue", "details": {"text": TEXT}}
    assert realised_line(decision) == f"measured: {TEXT}"


def _summary(realised: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {
        "arrived": 10, "completed": 10, "met_slo": 9, "aborted_by_restarts": 0, "rejected": 0,
        "missed_while_down": 0, "in_flight_at_end": 0,
    }  # fmt: skip
    return {
        "run_s": 10.0, "requests": counts, "slo_attainment": 0.9, "goodput_rps": 0.9,
        "goodput_tok_s": 9.0, "throughput_tok_s": 10.0, "preemptions": 0, "restarts": 1,
        "processes": [], "after_vs_before": None, "restart_costs": [], "actions": [],
        "proposals": [
            {"id": "p1", "made_at_s": 78.0, "at_s": 78.0, "answer": "approve",
             "accepted": True, "state": "verified", "prediction": FORECAST,
             "change": "ttft-queue on main: max_num_batched_tokens 256 -> 512"},
        ],
        "realised": realised, "acts": [],
    }  # fmt: skip


def test_the_summary_sets_the_measurement_against_the_prediction() -> None:
    lines = render(_summary([{"text": TEXT}]))
    assert (
        "  predicted for ttft-queue on main: max_num_batched_tokens 256 -> 512: SLO attainment "
        "47.3% -> 86.6%, goodput 6.37 -> 11.66 req/s"
    ) in lines
    assert f"  measured: {TEXT}" in lines
    unmeasured = render(_summary([]))
    assert "  the change's effect was not measured before the demo ended" in unmeasured


def test_a_run_on_a_machine_too_busy_for_the_simulated_server_says_so() -> None:
    # At a load average of 18 the server fell behind its model and the acts compared a slowed
    # real-time run with a virtual-time one that never falls behind (docs/demo.md).
    assert busy_lines({"behind_schedule_s": 0.2}) == []
    [line] = busy_lines({"behind_schedule_s": 41.7})
    assert line.startswith("warning: the machine was too busy for the simulated server")
    assert "gave up 42 s of it" in line
    assert line in render(_summary([{"text": TEXT}]) | {"behind_schedule_s": 41.7})
