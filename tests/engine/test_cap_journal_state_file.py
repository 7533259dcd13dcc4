"""The gate's cap journal lives in the state database and adopts an older file's rows once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from daemon.core.clock import SystemClock
from daemon.core.gate_actuation import CAP_APPLIED, CapResult
from daemon.engine.storage.cap_journal import LEGACY_FILE, SqliteCapJournal
from daemon.engine.storage.state_db import STATE_FILE
from daemon.engine.storage.state_store import StateStore


def _change(before: int, after: int) -> CapResult:
    return CapResult("main", "admission-cap", CAP_APPLIED, before, after, f"{before} -> {after}")


def _legacy_file(directory: Path, caps: list[tuple[int, int]]) -> Path:
    """A journal as earlier governors wrote it: a file of its own beside the state database."""
    legacy = directory / LEGACY_FILE
    journal = SqliteCapJournal(directory / "elsewhere" / STATE_FILE, SystemClock())
    for before, after in caps:
        journal.record(_change(before, after), "burst")
    journal.close()
    (directory / "elsewhere" / STATE_FILE).rename(legacy)
    return legacy


def test_cap_changes_share_the_state_database_with_the_other_stores(tmp_path: Path) -> None:
    path = tmp_path / STATE_FILE
    states = StateStore(path)
    journal = SqliteCapJournal(path, SystemClock())
    journal.record(_change(64, 32), "burst")
    journal.close()
    states.close()
    tables = {row[0] for row in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert {"cap_changes", "policy_state"} <= tables
    assert not (tmp_path / LEGACY_FILE).exists()


def test_an_older_cap_journal_file_is_adopted_once_and_set_aside(tmp_path: Path) -> None:
    legacy = _legacy_file(tmp_path, [(256, 128), (128, 96)])
    journal = SqliteCapJournal(tmp_path / STATE_FILE, SystemClock())
    journal.record(_change(96, 80), "burst")
    rows = journal.recent("main", 10)
    journal.close()
    assert [(row["before"], row["after"]) for row in rows] == [(96, 80), (128, 96), (256, 128)]
    assert not legacy.exists()
    assert Path(f"{legacy}.adopted").exists()
    # A crash after the copy but before the rename leaves the file back: never adopted twice.
    Path(f"{legacy}.adopted").rename(legacy)
    again = SqliteCapJournal(tmp_path / STATE_FILE, SystemClock())
    assert len(again.recent("main", 10)) == 3
    again.close()
    assert not legacy.exists()
