"""The journal of admission-cap changes: one durable row per change, in the state database.

Cap changes are many (a burst may move the cap a few times a minute) and restart nothing, so
they have a table of their own beside the actuation journal, whose done entries count against
restart budgets and dwell times. A row is written only for a change (applied, reverted,
failed), never for a hold or a refusal, and the table keeps the newest :data:`KEEP_ROWS` rows.

Earlier governors kept this table in a file of its own (:data:`LEGACY_FILE`). Opening the
journal adopts that file's rows once, in the transaction that marks the adoption done, and
renames the file ``*.adopted``; a crash in between leaves either nothing adopted or the rows
and the mark together, never rows twice.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from daemon.core.clock import Clock
from daemon.core.gate_actuation import CapResult, CapState
from daemon.engine.storage.state_db import Schema, connect, transaction

LEGACY_FILE = "gate-journal.sqlite3"
_ADOPTED = "gate_journal_adopted"  # its row in schema_versions: the legacy file's rows are in
KEEP_ROWS = 20_000
SCHEMA = Schema(
    "gate_journal",
    (
        """
CREATE TABLE IF NOT EXISTS cap_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, target TEXT NOT NULL,
    policy TEXT NOT NULL, state TEXT NOT NULL, before INTEGER, after INTEGER,
    reason TEXT NOT NULL, outcome TEXT NOT NULL
);
""",
    ),
)


class SqliteCapJournal:
    """Cap changes in the state database at ``path`` (``STATE_DIR/state.sqlite3``)."""

    def __init__(self, path: Path, clock: Clock) -> None:
        self._db = connect(path, SCHEMA)
        self._clock = clock
        legacy = path.parent / LEGACY_FILE
        if legacy.exists():
            try:
                _adopt(self._db, legacy)
            except BaseException:
                self._db.close()
                raise

    def close(self) -> None:
        """Close the file."""
        self._db.close()

    def record(self, result: CapResult, reason: str) -> None:
        """Keep one change, and forget the oldest beyond :data:`KEEP_ROWS`."""
        cursor = self._db.execute(
            "INSERT INTO cap_changes (at, target, policy, state, before, after, reason, outcome)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self._clock.wall().timestamp(),
                result.target,
                result.policy,
                result.state,
                result.before,
                result.after,
                reason,
                result.outcome,
            ),
        )
        if cursor.lastrowid is not None and cursor.lastrowid % 1000 == 0:
            self._db.execute(
                "DELETE FROM cap_changes WHERE id <= ?", (cursor.lastrowid - KEEP_ROWS,)
            )

    def recent(self, target: str, limit: int = 5) -> list[dict[str, Any]]:
        """The newest changes of ``target``, newest first."""
        rows = self._db.execute(
            "SELECT at, policy, state, before, after, reason, outcome FROM cap_changes"
            " WHERE target = ? ORDER BY id DESC LIMIT ?",
            (target, limit),
        )
        keys = ("at", "policy", "state", "before", "after", "reason", "outcome")
        changes = [dict(zip(keys, row, strict=True)) for row in rows]
        for change in changes:
            change["state"] = CapState(change["state"])
        return changes


def _adopt(db: sqlite3.Connection, legacy: Path) -> None:
    """Copy the legacy file's rows in (once), then rename the file out of the way."""
    adopted = db.execute(
        "SELECT version FROM schema_versions WHERE component = ?", (_ADOPTED,)
    ).fetchone()
    if adopted is None:
        # ATTACH is refused inside a transaction: attach first, copy and mark in one.
        db.execute("ATTACH DATABASE ? AS legacy", (str(legacy),))
        try:
            tables = db.execute(
                "SELECT name FROM legacy.sqlite_master WHERE type = 'table' AND name = ?",
                ("cap_changes",),
            ).fetchall()
            with transaction(db):
                if tables:
                    db.execute(
                        "INSERT INTO cap_changes"
                        " (at, target, policy, state, before, after, reason, outcome)"
                        " SELECT at, target, policy, state, before, after, reason, outcome"
                        " FROM legacy.cap_changes ORDER BY id"
                    )
                db.execute(
                    "INSERT INTO schema_versions (component, version) VALUES (?, 1)", (_ADOPTED,)
                )
        finally:
            db.execute("DETACH DATABASE legacy")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            Path(f"{legacy}{suffix}").rename(f"{legacy}{suffix}.adopted")
