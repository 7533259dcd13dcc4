"""The log-level actuator against the Envoy admin double and the real journal: crash recovery.

A governor that died with a change open finds, on its next start, what the service reads back,
and finishes the entry: done when the new level is in force, abandoned when the old one still
is, set back (and quarantined) when something else is.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from actuators.http_log_level.actuator import HttpLogLevelActuator
from daemon.api import ABANDONED, DONE, REVERTED, ChangeRequest, HttpLogLevelTarget, SystemClock
from daemon.engine.storage.journal_store import SqliteJournal
from tests.support.envoy_admin import EnvoyAdmin
from tests.support.hostile_metrics import HostileServer, ok_head, trickle

pytestmark = pytest.mark.asyncio


def target_of(admin: EnvoyAdmin) -> HttpLogLevelTarget:
    return HttpLogLevelTarget(
        name="envoy",
        url=f"{admin.url}/logging?level={{level}}",
        levels={"DEBUG": "debug", "INFO": "info", "WARNING": "warning", "ERROR": "error"},
    )


@pytest.mark.parametrize(
    ("level_at_restart", "state", "level_after"),
    [("error", DONE, "error"), ("info", ABANDONED, "info"), ("debug", REVERTED, "info")],
)
async def test_an_open_change_is_finished_from_what_the_service_reads_back(
    tmp_path: Path, level_at_restart: str, state: str, level_after: str
) -> None:
    with EnvoyAdmin() as admin:
        target = target_of(admin)
        journal = SqliteJournal(tmp_path / "state.sqlite3", SystemClock())
        plan = {"target": "envoy", "policy": "quiet", "knobs": {"log_level": [20.0, 40.0]}}
        entry = journal.begin("envoy", "quiet", plan, {})  # the governor died after this
        admin.state.level = level_at_restart
        actuator = HttpLogLevelActuator(journal, SystemClock(), tmp_path)
        result = await actuator.reconcile(target)
        assert result is not None
        assert (result.entry_id, result.state) == (entry.id, state), result.outcome
        assert result.quarantine is (state == REVERTED)
        assert admin.state.level == level_after
        assert journal.open_entry("envoy") is None
        assert await actuator.reconcile(target) is None, "nothing left to finish"
        journal.close()


async def test_one_change_in_flight_and_a_dry_run_sends_nothing(tmp_path: Path) -> None:
    with EnvoyAdmin() as admin:
        target = target_of(admin)
        journal = SqliteJournal(tmp_path / "state.sqlite3", SystemClock())
        actuator = HttpLogLevelActuator(journal, SystemClock(), tmp_path)
        request = ChangeRequest("envoy", "quiet", {"log_level": 40.0}, {"log_level": 20.0})
        dry = await actuator.apply(target, request, dry_run=True)
        assert dry.state == "dry_run"
        assert "would POST" in dry.outcome
        journal.begin("other-governor", "x", {}, {})  # unrelated target: no effect
        journal.begin("envoy", "x", {"knobs": {"log_level": [20.0, 30.0]}}, {})
        busy = await actuator.apply(target, request)
        assert busy.state == "refused"
        assert "in flight" in busy.outcome
        assert [m for m, _ in admin.state.requests if m == "POST"] == []
        journal.close()


async def test_a_trickling_admin_endpoint_costs_its_own_read_its_timeout_and_nothing_more(
    tmp_path: Path,
) -> None:
    listing = b"active loggers:\n  admin: info\n" * 20
    slowloris = trickle(ok_head(len(listing)), listing, bytes_per_s=20)
    with EnvoyAdmin() as admin, HostileServer(slowloris) as hostile:
        slow = HttpLogLevelTarget(
            name="slow",
            url=f"{hostile.base_url}/logging?level={{level}}",
            levels={"INFO": "info", "ERROR": "error"},
            timeout_s=0.5,
        )
        journal = SqliteJournal(tmp_path / "state.sqlite3", SystemClock())
        actuator = HttpLogLevelActuator(journal, SystemClock(), tmp_path)
        started = time.monotonic()
        levels = await asyncio.gather(*(actuator.read(t) for t in (slow, target_of(admin), slow)))
        took = time.monotonic() - started
        assert levels == [None, 20.0, None], "the slow one is unknown, the other one read"
        assert 0.5 <= took < 1.0, "each read ends at its own deadline"
        await asyncio.sleep(0.1)
        assert hostile.in_flight == 0, "the ended reads closed their connections"
        journal.close()
