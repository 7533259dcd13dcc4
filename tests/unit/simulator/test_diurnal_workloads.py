"""The compressed day of a real trace, its batch backlog, and batch windows over it."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from simulator.arrivals import Arrival
from simulator.batch_windows import closed, nightly, run_with_batch_window
from simulator.diurnal_workloads import DiurnalSpec, batch_jobs, load_diurnal, online_arrivals
from simulator.engine import Engine
from simulator.errors import SpecError
from simulator.lanes import Lane, lane_of
from simulator.profiles import EngineProfile
from simulator.requests import Outcome
from simulator.settings import EngineSettings, SchedulingPolicy
from simulator.shipped import WORKLOAD_DIR

SHIPPED = WORKLOAD_DIR / "diurnal-24h.yaml"
LENGTHS = {"median": 100, "p90": 200, "max": 400}


def _steady_trace(path: Path) -> Path:
    """One request a second for 100 s."""
    rows = "".join(f"{second}.0,10,5\n" for second in range(100))
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + rows)
    return path


def _spec(trace: Path, **fields: object) -> DiurnalSpec:
    values: dict[str, object] = {
        "name": "test",
        "trace": str(trace),
        "hour_s": 100,
        "hourly": [1.0] * 12 + [0.1] * 12,
    }
    values.update(fields)
    return DiurnalSpec.model_validate(values)


def _per_hour(arrivals: list[Arrival], hour_s: float) -> Counter[int]:
    return Counter(math.floor(arrival.arrived_at / hour_s) for arrival in arrivals)


def test_the_trace_plays_at_the_pace_of_the_hour_and_loops(tmp_path: Path) -> None:
    spec = _spec(_steady_trace(tmp_path / "trace.csv"), rate_scale=2.0)
    arrivals = online_arrivals(spec)
    hours = _per_hour(arrivals, spec.hour_s)
    # Inside the constant stretches: 2 rps by day, 0.2 rps by night, the trace looped.
    assert [hours[h] for h in (2, 6, 10)] == [200, 200, 200]
    assert [hours[h] for h in (14, 18, 22)] == [20, 20, 20]
    assert max(hours) == 23
    assert all(arrival.priority == 0 for arrival in arrivals)
    assert arrivals == sorted(arrivals)
    assert online_arrivals(spec) == arrivals


def test_a_profile_scale_applies_to_its_profile_only(tmp_path: Path) -> None:
    spec = _spec(_steady_trace(tmp_path / "trace.csv"), profile_rate_scale={"big": 0.5})
    assert _per_hour(online_arrivals(spec, profile="big"), 100)[5] == 50
    assert _per_hour(online_arrivals(spec, profile="other"), 100)[5] == 100


def test_the_shipped_day_has_a_deep_night_trough_and_a_backlog() -> None:
    spec = load_diurnal(SHIPPED)
    assert spec.duration_s == 24 * 600
    arrivals = online_arrivals(spec, profile="llama-3.1-8b-h100-tp1")
    hours = _per_hour(arrivals, spec.hour_s)
    assert sorted(hours) == list(range(24))
    # Night against day, over three hours each (the trace's own minute-scale swings of up to
    # 1.5x are in every hour, stretched).
    night = hours[3] + hours[4] + hours[5]
    day = hours[12] + hours[13] + hours[14]
    assert night < 0.1 * day
    assert len(arrivals) > 100_000  # the one-hour trace is looped
    jobs = batch_jobs(spec)
    assert len(jobs) == 300_000
    assert {job.priority for job in jobs} == {1000}
    assert all(lane_of(job.priority) is Lane.BATCH for job in jobs[:10])
    assert batch_jobs(spec)[:100] == jobs[:100]


def test_a_day_needs_one_multiplier_per_hour(tmp_path: Path) -> None:
    path = tmp_path / "day.yaml"
    path.write_text(
        "name: day\ntrace: azure-llm-2023-conv\nhour_s: 60\nhourly: [1, 2]\nbatch:\n"
        "  requests: 3\n  priority: 0\n"
        "  prompt_tokens: {median: 100, p90: 200, max: 400}\n"
        "  output_tokens: {median: 100, p90: 200, max: 400}\n"
    )
    with pytest.raises(SpecError) as caught:
        load_diurnal(path)
    keys = {(issue.line, issue.key) for issue in caught.value.issues}
    assert keys == {(4, "hourly"), (7, "batch.priority")}


@pytest.mark.parametrize(
    ("hour", "inside"), [(0.5, True), (22.0, True), (5.99, True), (6.0, False), (12.0, False)]
)
def test_a_nightly_window_wraps_midnight(hour: float, inside: bool) -> None:
    window = nightly(start_hour=22, end_hour=6, concurrency=8, hour_s=60)
    assert window(hour * 60 + 24 * 60) == (8 if inside else 0)


def test_a_window_caps_the_batch_requests_in_flight(profile_8b: EngineProfile) -> None:
    online = [Arrival(i * 0.5, 200, 20) for i in range(20)]
    backlog = [Arrival(0.0, 300, 50, priority=1000) for _ in range(30)]
    settings = EngineSettings.defaults(profile_8b, scheduling_policy=SchedulingPolicy.PRIORITY)

    def window(now: float) -> int:
        return 3 if now < 5.0 else 0

    run = run_with_batch_window(
        Engine(profile_8b, settings), online, backlog, window, until=30.0, tick_s=0.1
    )
    batch = [r for r in run.finished if lane_of(r.priority) is Lane.BATCH]
    online_records = [r for r in run.finished if lane_of(r.priority) is Lane.ONLINE]
    assert len(online_records) == 20
    assert batch, "the window sent nothing"
    assert all(r.outcome is Outcome.COMPLETED for r in batch)
    assert all(r.arrived_at < 5.0 for r in batch), "sent while closed"
    events = sorted([(r.arrived_at, 1) for r in batch] + [(r.finished_at, -1) for r in batch])
    in_flight = peak = 0
    for _, change in events:
        in_flight += change
        peak = max(peak, in_flight)
    assert peak == 3
    none = run_with_batch_window(
        Engine(profile_8b, settings), online, backlog, closed, until=30.0, tick_s=0.1
    )
    assert all(lane_of(r.priority) is Lane.ONLINE for r in none.finished)
    assert none.now >= 30.0
