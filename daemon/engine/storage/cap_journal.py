"""The journal of admission-cap changes: one durable row per change, in its own SQLite file.

Cap changes are many (a burst may move the cap a few times a minute) and restart nothing, so
they stay out of the actuation journal, whose done entries count against restart budgets and
dwell times. A row is written only for a change (applied, reverted, failed), never for a hold
or a refusal, and the table keeps the newest :data:`KEEP_ROWS` rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daemon.core.clock import Clock
from daemon.core.gate_actuation import CapResult
from daemon.engine.storage.state_db import Schema, connect

FILE = "gate-journal.sqlite3"
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
    """Cap changes in ``STATE_DIR/gate-journal.sqlite3``."""

    def __init__(self, path: Path, clock: Clock) -> None:
        self._db = connect(path, SCHEMA)
        self._clock = clock

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
        return [dict(zip(keys, row, strict=True)) for row in rows]
