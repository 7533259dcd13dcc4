"""The governed batch day: the daemon's own window drives the batch lane in virtual time.

A compressed diurnal day (20 virtual seconds an hour, so the example policy's two quiet
minutes are six hours of the day) with the example batch-window policy: the daemon takes
the backlog from its inbox, and its lane sends the lines to the simulated engine.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from daemon.app.simulation.batch_day import DayPlan, GovernedDay, govern_day
from simulator.diurnal_workloads import DiurnalSpec, load_diurnal
from simulator.lanes import Lane, lane_of
from simulator.requests import Outcome
from simulator.shipped import WORKLOAD_DIR

EXAMPLE_POLICIES = Path(__file__).resolve().parents[3] / "examples" / "policies"
HOUR_S = 20.0
BATCH_PRIORITY = 1000  # [batch] priority's default
EXAMPLE_SPACING_S = 0.32  # the example window's shortest pace on this backlog's prompts


@pytest.fixture(scope="module")
def spec() -> DiurnalSpec:
    return load_diurnal(WORKLOAD_DIR / "diurnal-24h.yaml").model_copy(update={"hour_s": HOUR_S})


@pytest.fixture(scope="module")
def day(spec: DiurnalSpec) -> GovernedDay:
    plan = DayPlan(policy_dirs=(EXAMPLE_POLICIES,), chunk_lines=400, lane_sample_s=HOUR_S / 4)
    return govern_day(spec, "llama-3.1-8b-h100-tp1", plan)


def _hour(t: float) -> float:
    return t / HOUR_S


def test_the_lane_opens_in_the_night_trough_and_closes_when_online_load_returns(
    day: GovernedDay, spec: DiurnalSpec
) -> None:
    open_at = [t for t, in_flight in day.lane if in_flight > 0]
    assert open_at, "the lane never opened"
    trough = [hour for hour, rate in enumerate(spec.hourly) if rate <= 0.12]  # 02:00-06:00
    # Opened after the policy's two quiet minutes inside the trough, not before it.
    assert trough[0] < _hour(open_at[0]) < trough[-1] + 2
    # Shut by the time the morning's load is back (10:00: 0.88 of the peak) and all day.
    busy = next(hour for hour, rate in enumerate(spec.hourly) if hour > 6 and rate >= 0.85)
    assert _hour(open_at[-1]) < busy
    peak_hours = [t for t, _ in day.lane if busy <= _hour(t) < 22]
    assert peak_hours
    assert all(in_flight == 0 for t, in_flight in day.lane if busy <= _hour(t) < 22)


def test_batch_requests_reach_the_engine_at_the_lowest_priority(day: GovernedDay) -> None:
    assert day.job_files >= 1
    assert day.priorities == {BATCH_PRIORITY: day.sent}
    records = day.run.finished
    batch = [r for r in records if r.request_id.startswith("client-")]
    online = [r for r in records if not r.request_id.startswith("client-")]
    assert {r.priority for r in batch} == {BATCH_PRIORITY}
    assert {lane_of(r.priority) for r in online} == {Lane.ONLINE}
    completed = [r for r in batch if r.outcome is Outcome.COMPLETED]
    assert sum(r.output_tokens for r in completed) > 0


def test_the_example_window_paces_its_batch_starts(day: GovernedDay) -> None:
    # Requests freed together are not started together: their prefills would share one long
    # step that every online request arriving meanwhile waits for (docs/batch.md).
    starts = sorted(r.arrived_at for r in day.run.finished if r.request_id.startswith("client-"))
    assert len(starts) > 10
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    # The engine takes a request at its next look at the clock (DayPlan.tick_s), so a start
    # reaches it up to one tick late.
    assert min(gaps) >= EXAMPLE_SPACING_S - DayPlan(policy_dirs=()).tick_s - 1e-6, min(gaps)
