"""Online and batch requests accounted apart, in the report, per period and per process."""

from __future__ import annotations

import pytest

from simulator.arrivals import Arrival
from simulator.lanes import Lane, lane_of, lanes_by_period
from simulator.profiles import EngineProfile
from simulator.requests import FinishedRequest, Outcome
from simulator.server.run_summary import RunLedger, summary_line
from simulator.settings import EngineSettings, SchedulingPolicy
from simulator.static_runs import simulate


def _record(arrived: float, finished: float, priority: int, **fields: object) -> FinishedRequest:
    values: dict[str, object] = {
        "request_id": f"r{arrived}-{priority}",
        "arrived_at": arrived,
        "finished_at": finished,
        "prompt_tokens": 10,
        "output_tokens": 5,
        "outcome": Outcome.COMPLETED,
        "ttft_s": 0.1,
        "tpot_s": 0.01,
        "priority": priority,
    }
    values.update(fields)
    return FinishedRequest(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("priority", "lane"), [(-3, Lane.ONLINE), (0, Lane.ONLINE), (1, Lane.BATCH), (1000, Lane.BATCH)]
)
def test_a_priority_above_0_is_the_batch_lane(priority: int, lane: Lane) -> None:
    assert lane_of(priority) is lane


def test_the_report_accounts_each_lane_apart(profile_8b: EngineProfile) -> None:
    online = [Arrival(i * 0.05, 200, 20) for i in range(20)]
    batch = [Arrival(0.5 + i * 0.01, 500, 100, priority=1000) for i in range(30)]
    arrivals = sorted(online + batch)
    settings = EngineSettings.defaults(profile_8b, scheduling_policy=SchedulingPolicy.PRIORITY)
    report = simulate(profile_8b, settings, arrivals, "mixed")
    lanes = report["lanes"]
    assert lanes["online"]["requests"] == 20
    assert lanes["online"]["output_tokens"] == 20 * 20
    assert lanes["online"]["slo_attainment"] == 1.0
    assert lanes["batch"]["requests"] == lanes["batch"]["completed"] == 30
    assert lanes["batch"]["output_tokens"] == 30 * 100
    assert lanes["batch"]["prompt_tokens"] == 30 * 500
    assert report["requests"]["total"] == 50
    assert any("priority" in line for line in report["assumptions"])


def test_per_period_online_counts_where_it_arrived_batch_where_it_completed() -> None:
    records = [
        _record(10.0, 70.0, 0),  # online, arrived in period 0
        _record(50.0, 130.0, 0, ttft_s=3.0),  # online, period 0, misses the TTFT objective
        _record(70.0, 80.0, 0, outcome=Outcome.REJECTED, ttft_s=None, tpot_s=None),
        _record(5.0, 150.0, 1000),  # batch, completed in period 2
        _record(65.0, 100.0, 1000, outcome=Outcome.ABORTED, output_tokens=3),
    ]
    periods = lanes_by_period(records, 60.0)
    assert [p["start_s"] for p in periods] == [0.0, 60.0, 120.0]
    assert [p["online"]["requests"] for p in periods] == [2, 1, 0]
    assert [p["online"]["slo_attainment"] for p in periods] == [0.5, 0.0, None]
    assert [p["online"]["ttft_p95_s"] for p in periods] == [3.0, None, None]
    assert [p["batch"]["output_tokens"] for p in periods] == [0, 0, 5]
    assert [p["batch"]["aborted"] for p in periods] == [0, 1, 0]


def test_a_process_summary_counts_the_lanes_apart() -> None:
    ledger = RunLedger()
    for record in (
        _record(0.0, 1.0, 0),
        _record(0.0, 1.0, 0, ttft_s=5.0),
        _record(0.0, 1.0, 1000, output_tokens=40),
        _record(0.0, 1.0, 1000, outcome=Outcome.ABORTED),
    ):
        ledger.observe(record)
    line = summary_line(ledger, settings={}, ready_at=0.0, stopped_at=1.0, preemptions=0, load=None)
    assert line["lanes"] == {
        "online": {"requests": 2, "met_slo": 1},
        "batch": {"requests": 2, "completed": 1, "output_tokens": 40},
    }
    assert line["met_slo"] == 2  # all requests, as before


def test_a_process_summary_counts_requests_by_the_second_they_arrived() -> None:
    # The demo counts each act of its workload from these rows (issue 16, the demo).
    ledger = RunLedger()
    for record in (
        _record(0.2, 1.0, 0),
        _record(0.9, 1.0, 0, ttft_s=5.0),
        _record(3.5, 4.0, 0, outcome=Outcome.REJECTED, ttft_s=None, tpot_s=None),
    ):
        ledger.observe(record)
    line = summary_line(ledger, settings={}, ready_at=0.0, stopped_at=4.0, preemptions=0, load=None)
    assert line["by_arrival_second"] == [[0, 2, 1], [3, 1, 0]]
    # And the schedule it gave up, on a machine too busy for it (none here).
    assert line["given_up_s"] == 0.0
