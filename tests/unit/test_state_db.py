"""The state database's versioned migrations, on real SQLite files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from daemon.engine.storage.journal_store import SCHEMA as JOURNAL
from daemon.engine.storage.proposal_store import SCHEMA as APPROVALS
from daemon.engine.storage.state_db import Schema, StateSchemaError, connect, schema_version
from daemon.engine.storage.state_store import SCHEMA as POLICIES

V1 = "CREATE TABLE IF NOT EXISTS things (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
V2 = "ALTER TABLE things ADD COLUMN colour TEXT NOT NULL DEFAULT 'grey';\nCREATE INDEX by_name ON things (name);"


def test_a_fresh_file_gets_every_store_at_its_latest_version_in_wal(tmp_path: Path) -> None:
    path = tmp_path / "state" / "state.sqlite3"
    for schema in (POLICIES, JOURNAL, APPROVALS):
        connect(path, schema).close()
    db = connect(path, POLICIES)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    for schema in (POLICIES, JOURNAL, APPROVALS):
        assert schema_version(db, schema.component) == schema.version
    db.close()


def test_a_file_from_before_versioning_keeps_its_rows_and_is_versioned(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    with sqlite3.connect(path) as old:  # as the governor created it before migrations
        old.executescript(V1)
        old.execute("INSERT INTO things (name) VALUES ('kept')")
    db = connect(path, Schema("things", (V1, V2)))
    assert db.execute("SELECT name, colour FROM things").fetchall() == [("kept", "grey")]
    assert schema_version(db, "things") == 2
    db.close()
    # Opening again applies nothing twice (the index exists once).
    connect(path, Schema("things", (V1, V2))).close()


def test_a_failing_migration_leaves_the_last_whole_version(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    connect(path, Schema("things", (V1,))).close()
    broken = "ALTER TABLE things ADD COLUMN size INTEGER;\nALTER TABLE nowhere ADD COLUMN x;"
    with pytest.raises(StateSchemaError, match=r"to version 2 failed .*left at version 1"):
        connect(path, Schema("things", (V1, broken)))
    db = sqlite3.connect(path)
    columns = [row[1] for row in db.execute("PRAGMA table_info(things)")]
    assert columns == ["id", "name"], "the half of the migration that ran was rolled back"
    assert schema_version(db, "things") == 1
    db.close()


def test_a_file_migrated_by_a_newer_governor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    connect(path, Schema("things", (V1, V2))).close()
    with pytest.raises(StateSchemaError, match="schema version 2, newer than this governor's 1"):
        connect(path, Schema("things", (V1,)))
