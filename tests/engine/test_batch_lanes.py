"""The batch lane on a real event loop: a job against ``sim serve`` as the lane moves, and the
steerer that moves it from policy states, freezes and changes in flight."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from daemon.batch.input_file import read_batch_file
from daemon.batch.jobs import BatchJob, JobState, LineState
from daemon.batch.scheduling import PRIORITY, Scheduling
from daemon.core.batch_settings import BatchSection
from daemon.core.settings import GovernorConfig
from daemon.engine.batches.crash_points import CrashPoints
from daemon.engine.batches.job_runner import JobRunner
from daemon.engine.batches.lane_steerer import LaneSteerer
from daemon.engine.batches.lanes import BatchLanes, Lane
from daemon.engine.storage.batch_ledger import BatchLedger
from daemon.policy.evaluate import TargetView
from daemon.policy.loading import parse_policy
from daemon.policy.state import Phase, PolicyState
from tests.engine.test_batch_runner import scripted
from tests.support.batches import Tally, result_ids, write_batch
from tests.support.sim_serve import sim_serve

pytestmark = pytest.mark.asyncio

START = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)


class Clock:
    """The loop's clock for durations, a fixed wall clock."""

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    def wall(self) -> datetime:
        return START


def _job(ledger: BatchLedger, path: Path) -> BatchJob:
    batch = read_batch_file(path, max_bytes=1 << 20, max_lines=100)
    job = BatchJob(
        "batch_00000000000000aa",
        path,
        batch.sha256,
        "main",
        JobState.QUEUED,
        START,
        None,
        len(batch.lines),
    )
    ledger.add(job, batch.lines)
    return job


async def _until(condition: object, what: str) -> None:
    """Poll ``condition`` (a callable) until true; the test's own timeout bounds it."""
    assert callable(condition)
    while not condition():
        await asyncio.sleep(0.01)


async def test_narrowing_and_closing_the_lane_cancel_the_newest_and_lose_no_line(
    tmp_path: Path, ledger: BatchLedger
) -> None:
    path = tmp_path / "jobs.jsonl"
    ids = write_batch(path, 40, max_tokens=96)
    settings = BatchSection(concurrency=6, retry_base_s=0.01, retry_cap_s=0.02)
    lane = Lane("main", 4, "test")
    most: list[int] = []

    async def watch() -> None:
        while True:
            most.append(lane.in_flight)
            await asyncio.sleep(0.002)

    with sim_serve(tmp_path, "max-num-seqs: 8\n") as sim:
        job = _job(ledger, path)
        runner = JobRunner(
            job,
            ledger,
            settings,
            base_url=f"http://127.0.0.1:{sim.port}",
            clock=Clock(),
            crash_points=CrashPoints(""),
            lane=lane,
        )
        running = asyncio.create_task(runner.run())
        await _until(lambda: lane.in_flight == 4 and len(result_ids(path)[0]) >= 2, "4 in flight")
        watcher = asyncio.create_task(watch())
        assert max(most or [0]) <= 4
        lane.set(1, "online load is back")
        await asyncio.sleep(0)  # the cancelled requests end at their next step
        await _until(lambda: lane.in_flight <= 1, "narrowed")
        # The newest beyond 1 were cut (fewer than 3 when some were answered just then).
        cut = lane.narrowed
        assert 1 <= cut <= 3
        most.clear()
        lane.set(0, "closed")
        # Closed: nothing in flight, and each worker has put its request's line back or
        # written its result (an answer that came just before the close is still written).
        await _until(
            lambda: lane.in_flight == 0 and ledger.counts(job.job_id)[LineState.IN_FLIGHT] == 0,
            "closed",
        )
        done_closed = ledger.counts(job.job_id)[LineState.DONE]
        most.clear()
        await asyncio.sleep(0.2)  # closed: nothing may be sent meanwhile
        assert max(most) == 0
        assert ledger.counts(job.job_id)[LineState.DONE] == done_closed
        assert ledger.counts(job.job_id)[LineState.IN_FLIGHT] == 0
        lane.set(3, "open again")
        state = await running
        watcher.cancel()
    assert state is JobState.COMPLETED
    assert max(most) <= 3
    tally = Tally.of(ids, path)
    assert (tally.lost, tally.duplicated) == (0, 0)
    # The lines the lane cut off were sent again: more sends than lines.
    assert ledger.sends(job.job_id) >= 40 + cut


POLICY = """\
name: night-batch
when: running < 4.0
action:
  batch: {concurrency: "current + 2.0"}
"""


def _config(tmp_path: Path) -> GovernorConfig:
    return GovernorConfig.model_validate(
        {
            "governor": {"state_dir": str(tmp_path)},
            "vllm": [{"name": "main", "url": "http://127.0.0.1:1"}],
            "batch": {"concurrency": 8},
        }
    )


async def test_the_steerer_follows_the_policy_and_stops_at_freezes_and_changes_in_flight(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    spec = parse_policy(POLICY, Path("night.yaml"))
    states: dict[tuple[str, str], PolicyState] = {}
    in_flight: dict[str, str] = {}
    lanes = BatchLanes()
    steerer = LaneSteerer(
        config=lambda: config,
        specs=lambda: (spec,),
        states=lambda: states,
        views=lambda: {"main": TargetView("main", {"running": 1.0}, {})},
        lanes=lanes,
        in_flight=in_flight.get,
        clock=Clock(),
        registry=CollectorRegistry(),
        read=lambda _instance: Scheduling(PRIORITY, "test"),
    )
    lane = lanes.lane("main")
    await steerer.refresh_scheduling()
    steerer.tick_once()
    assert (lane.width, lane.policy) == (0, None)  # watched, not firing: closed
    states[("night-batch", "main")] = PolicyState(Phase.FIRING, since=0.0)
    steerer.tick_once()
    steerer.tick_once()
    assert (lane.width, lane.policy) == (4, "night-batch")  # 0 + 2, then 2 + 2
    # A freeze holds it: no widening...
    (tmp_path / "freeze.main").write_text("maintenance\n")
    steerer.tick_once()
    assert lane.width == 4
    assert "may not widen" in lane.reason
    # ...but closing passes: the policy stops firing.
    states[("night-batch", "main")] = PolicyState(Phase.INACTIVE, since=1.0)
    steerer.tick_once()
    assert lane.width == 0
    (tmp_path / "freeze.main").unlink()
    # A change in flight on the target closes the lane whatever the policy says.
    states[("night-batch", "main")] = PolicyState(Phase.FIRING, since=2.0)
    in_flight["main"] = "change 7 of main by kv-thrash is in flight (restarting)"
    steerer.tick_once()
    assert lane.width == 0
    assert "change 7" in lane.reason
    del in_flight["main"]
    await steerer.refresh_scheduling()  # read again: the server may have come back otherwise
    steerer.tick_once()
    assert lane.width == 2
    assert lane.priority == 1000  # priority scheduling: batch requests go last


async def test_under_fcfs_the_steerer_sends_no_priority_and_closes_while_requests_wait(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    spec = parse_policy(POLICY, Path("night.yaml"))
    states = {("night-batch", "main"): PolicyState(Phase.FIRING, since=0.0)}
    signals = {"running": 1.0, "waiting": 0.0}
    lanes = BatchLanes()
    steerer = LaneSteerer(
        config=lambda: config,
        specs=lambda: (spec,),
        states=lambda: states,
        views=lambda: {"main": TargetView("main", dict(signals), {"max_num_seqs": 16.0})},
        lanes=lanes,
        in_flight=lambda _target: None,
        clock=Clock(),
        registry=CollectorRegistry(),
        read=lambda _instance: Scheduling("fcfs", "test"),
        views_ttl_s=0.0,  # the test changes the signals between looks taken at one moment
    )
    await steerer.refresh_scheduling()
    lane = lanes.lane("main")
    for _ in range(4):
        steerer.tick_once()
    assert (lane.width, lane.priority) == (4, None)  # 16 x 0.25, though the policy says 8
    signals["waiting"] = 2.0
    steerer.tick_once()
    assert lane.width == 0
    assert "wait in vLLM" in lane.reason


class SteppedClock:
    """A loop clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return START


async def test_under_fcfs_a_closed_lane_waits_before_it_opens_again(tmp_path: Path) -> None:
    config = _config(tmp_path)
    spec = parse_policy(POLICY, Path("night.yaml"))
    states = {("night-batch", "main"): PolicyState(Phase.FIRING, since=0.0)}
    signals = {"running": 1.0, "waiting": 1.0}
    clock = SteppedClock()
    lanes = BatchLanes()
    steerer = LaneSteerer(
        config=lambda: config,
        specs=lambda: (spec,),
        states=lambda: states,
        views=lambda: {"main": TargetView("main", dict(signals), {"max_num_seqs": 16.0})},
        lanes=lanes,
        in_flight=lambda _target: None,
        clock=clock,
        registry=CollectorRegistry(),
        read=lambda _instance: Scheduling("fcfs", "test"),
        views_ttl_s=0.0,
    )
    await steerer.refresh_scheduling()
    lane = lanes.lane("main")
    steerer.tick_once()
    assert lane.width == 0  # a request waits
    signals["waiting"] = 0.0
    clock.now = 9.0
    steerer.tick_once()
    assert lane.width == 0  # the queue just emptied: not yet
    assert "reopens 10 s after" in lane.reason
    clock.now = 10.0
    steerer.tick_once()
    assert lane.width == 2  # 0 + 2: the policy's width again


async def test_a_target_no_batch_policy_watches_runs_at_batch_concurrency(tmp_path: Path) -> None:
    lanes = BatchLanes()
    steerer = LaneSteerer(
        config=lambda: _config(tmp_path),
        specs=tuple,
        states=dict,
        views=dict,
        lanes=lanes,
        in_flight=lambda _target: None,
        clock=Clock(),
        registry=CollectorRegistry(),
    )
    steerer.tick_once()
    assert lanes.lane("main").width == 8


@pytest.mark.parametrize("priority", [1000, None])
async def test_batch_requests_carry_the_lanes_priority_only_where_the_server_takes_one(
    tmp_path: Path, ledger: BatchLedger, priority: int | None
) -> None:
    path = tmp_path / "jobs.jsonl"
    write_batch(path, 3)
    sent_as_written = [
        line.body for line in read_batch_file(path, max_bytes=1 << 20, max_lines=10).lines
    ]
    lane = Lane("main", 1, "test")
    lane.priority = priority
    async with scripted([]) as server:
        job = _job(ledger, path)
        runner = JobRunner(
            job,
            ledger,
            BatchSection(concurrency=1),
            base_url=f"http://127.0.0.1:{server.port}",
            clock=Clock(),
            crash_points=CrashPoints(""),
            lane=lane,
        )
        assert await runner.run() is JobState.COMPLETED
    if priority is None:  # fcfs: vLLM refuses a priority (400); the file's bytes as they are
        assert sorted(server.bodies) == sorted(sent_as_written)
    else:
        assert {json.loads(body)["priority"] for body in server.bodies} == {1000}
        assert sorted(json.loads(body)["prompt"] for body in server.bodies) == sorted(
            json.loads(body)["prompt"] for body in sent_as_written
        )


async def test_a_job_whose_lane_stays_closed_expires_at_its_deadline_not_never(
    tmp_path: Path, ledger: BatchLedger
) -> None:
    path = tmp_path / "jobs.jsonl"
    ids = write_batch(path, 3)
    batch = read_batch_file(path, max_bytes=1 << 20, max_lines=10)
    job = BatchJob(
        "batch_00000000000000bb",
        path,
        batch.sha256,
        "main",
        JobState.QUEUED,
        START,
        START + timedelta(seconds=0.2),
        len(batch.lines),
    )
    ledger.add(job, batch.lines)
    runner = JobRunner(
        job,
        ledger,
        BatchSection(concurrency=2),
        base_url="http://127.0.0.1:1",  # never reached: the lane stays closed
        clock=Clock(),
        crash_points=CrashPoints(""),
        lane=Lane("main", 0, "closed for the test"),
    )
    assert await runner.run() is JobState.EXPIRED
    assert ledger.sends(job.job_id) == 0
    tally = Tally.of(ids, path)
    assert (tally.lost, tally.duplicated) == (0, 0)
    assert len(result_ids(path)[1]) == 3  # each written once, as batch_expired


async def test_a_look_reuses_views_younger_than_a_scrape(tmp_path: Path) -> None:
    config = _config(tmp_path)
    spec = parse_policy(POLICY, Path("night.yaml"))
    states = {("night-batch", "main"): PolicyState(Phase.FIRING, since=0.0)}
    built: list[int] = []

    def views() -> dict[str, TargetView]:
        built.append(1)
        return {"main": TargetView("main", {"running": 1.0}, {})}

    steerer = LaneSteerer(
        config=lambda: config,
        specs=lambda: (spec,),
        states=lambda: states,
        views=views,
        lanes=BatchLanes(),
        in_flight=lambda _target: None,
        clock=Clock(),
        registry=CollectorRegistry(),
        read=lambda _instance: Scheduling(PRIORITY, "test"),
    )
    await steerer.refresh_scheduling()
    for _ in range(5):
        steerer.tick_once()
    assert len(built) == 1  # five looks within 2 s: the views were built once
