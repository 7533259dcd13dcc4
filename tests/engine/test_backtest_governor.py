"""A backtest's governor: the daemon's Governor, in-process, fed by a recording in virtual time.

The composition is the daemon's (policies, evaluator, planner, router, actuation plane and its
runner, approvals, control socket); the ports differ: the recording is the signal feed and the
clock, and the would-have actuator stands in for the vLLM actuator. An hour of recording passes
on the loop's virtual clock; no test here sleeps for real.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from actuators.kinds import VLLM
from daemon.app.backtest.governed import governed_config
from daemon.app.backtest.recorded_feed import RecordedClock, RecordedFeed
from daemon.app.backtest.recording import read_recording
from daemon.app.backtest.would_have import WOULD_HAVE, WouldHaveActuator
from daemon.core.actuation import DONE
from daemon.core.actuator_kinds import ActuatorServices
from daemon.core.clock import SystemClock
from daemon.core.virtual_time import run_in_virtual_time
from daemon.engine.governor import Governor, LoadedConfig
from daemon.engine.runtime.service_manager import NoServiceManager
from daemon.engine.storage.journal_store import SqliteJournal
from daemon.engine.storage.state_db import STATE_FILE
from tests.unit.backtest.worlds import (
    INTERVAL_S,
    START,
    busy,
    config,
    series,
    write_policy,
    write_recording,
)

HOUR_TICKS = int(3600 / INTERVAL_S)
KNOBS = {"max_num_seqs": 256.0}


def test_the_governor_runs_an_hour_of_recording_in_virtual_time(short_tmp: Path) -> None:
    busy_then_calm = series((30, {"running": 12.0}), (30, {"running": 2.0}))
    recording = write_recording(short_tmp / "rec.jsonl", (busy_then_calm * 12)[:HOUR_TICKS], KNOBS)
    ticks = read_recording([recording]).ticks
    policies = write_policy(short_tmp / "policies", "busy", busy())
    freezes = short_tmp / "freezes"
    governed = governed_config(config(state_dir=freezes), policies, short_tmp, ["main"])

    async def main() -> tuple[float, Governor]:
        loop = asyncio.get_running_loop()
        feed = RecordedFeed(ticks)
        clock = RecordedClock(loop, feed)

        def actuator(services: ActuatorServices) -> WouldHaveActuator:
            return WouldHaveActuator(services.journal, services.clock, freezes, feed.knobs)

        governor = Governor(
            LoadedConfig(governed, short_tmp / "config.toml", clock.wall()),
            clock,
            NoServiceManager(),
            kinds=(replace(VLLM, factory=actuator),),
            feed=feed,
        )
        async with asyncio.TaskGroup() as group:
            group.create_task(governor.run(), name="governor")
            await feed.finished.wait()
            ended_at = loop.time()
            governor.request_stop()
        return ended_at, governor

    ended_at, governor = run_in_virtual_time(main())

    # One evaluation per recorded tick, the last at the recorded hour's last moment.
    registry = governor.metrics.registry
    assert registry.get_sample_value("vllm_governor_evaluation_seconds_count") == HOUR_TICKS
    assert ended_at == (HOUR_TICKS - 1) * INTERVAL_S
    # Twelve busy half-minutes: the first halving at +10 s, then one per dwell (120 s) while
    # busy; each went through the actuation runner to the would-have actuator and was journaled
    # at its tick's recorded wall-clock time, as the daemon journals a change.
    journal = SqliteJournal(short_tmp / "state" / STATE_FILE, SystemClock())
    try:
        entries = list(reversed(journal.recent(1000)))
    finally:
        journal.close()
    assert [entry.state for entry in entries] == [DONE] * len(entries)
    assert {entry.outcome for entry in entries} == {WOULD_HAVE}
    assert entries[0].started_at == ticks[2].wall == START.replace(second=10)
    done = registry.get_sample_value(
        "vllm_governor_actuations_total", {"target": "main", "state": "done"}
    )
    assert done == len(entries) > 1
