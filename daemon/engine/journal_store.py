"""The actuation journal, the quarantine list and the pending proposals, in the state database.

The journal is write-ahead: an entry is opened (with the plan, which holds the last-known-good
files in full) before the first byte of a config file is written, every step is appended as it
is reached, and the entry is closed with its outcome and per-phase timings. A partial unique
index allows one *open* entry per server: "one change in flight per instance", enforced by
SQLite across processes and restarts rather than by memory. Closed entries are the audit log of
changes. Times are wall-clock seconds (the journal must mean something after a reboot).

Tables::

    actuations(id, target, policy, state, step, plan JSON, facts JSON, started_at,
               finished_at, outcome, timings JSON)      one row per change, open or finished
    actuation_steps(actuation, at, step, facts JSON)    every step of every change, in order
    quarantine(policy, target, since, reason, actuation) policies whose change was reverted
    proposals(id, at, policy, target, state, changes, current, reason, evidence, risk)
                                                        approval-risk intents waiting for people
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon.core.actuation import OPEN, ChangeRequest, JournalEntry
from daemon.core.clock import Clock
from daemon.core.errors import ChangeInFlight

SCHEMA = """
CREATE TABLE IF NOT EXISTS actuations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, target TEXT NOT NULL, policy TEXT NOT NULL,
    state TEXT NOT NULL, step TEXT NOT NULL, plan TEXT NOT NULL, facts TEXT NOT NULL,
    started_at REAL NOT NULL, finished_at REAL, outcome TEXT NOT NULL DEFAULT '',
    timings TEXT NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX IF NOT EXISTS one_open_change_per_target ON actuations (target)
    WHERE state = 'open';
CREATE TABLE IF NOT EXISTS actuation_steps (
    actuation INTEGER NOT NULL REFERENCES actuations (id), at REAL NOT NULL,
    step TEXT NOT NULL, facts TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS quarantine (
    policy TEXT NOT NULL, target TEXT NOT NULL, since REAL NOT NULL, reason TEXT NOT NULL,
    actuation INTEGER, PRIMARY KEY (policy, target)
);
CREATE TABLE IF NOT EXISTS proposals (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, policy TEXT NOT NULL,
    target TEXT NOT NULL, state TEXT NOT NULL, changes TEXT NOT NULL, current TEXT NOT NULL,
    reason TEXT NOT NULL, evidence TEXT NOT NULL, risk TEXT NOT NULL
);
"""

_COLUMNS = "id, target, policy, state, step, plan, facts, started_at, finished_at, outcome, timings"


class SqliteJournal:
    """The engine's :class:`~daemon.core.actuation.ActuationJournal`, and its neighbours."""

    def __init__(self, path: Path, clock: Clock) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._clock = clock
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def begin(
        self, target: str, policy: str, plan: Mapping[str, Any], facts: Mapping[str, Any]
    ) -> JournalEntry:
        """Open an entry at step ``planned``; see the protocol."""
        now = self._now()
        try:
            with self._transaction():
                cursor = self._db.execute(
                    "INSERT INTO actuations (target, policy, state, step, plan, facts, started_at)"
                    " VALUES (?, ?, ?, 'planned', ?, ?, ?)",
                    (target, policy, OPEN, _json(plan), _json(facts), now),
                )
                entry_id = cursor.lastrowid
                assert entry_id is not None
                self._db.execute(
                    "INSERT INTO actuation_steps VALUES (?, ?, 'planned', '{}')", (entry_id, now)
                )
        except sqlite3.IntegrityError as exc:
            message = f"another change of {target} is in flight (open in the journal)"
            raise ChangeInFlight(message) from exc
        entry = self._entry(entry_id)
        assert entry is not None
        return entry

    def step(self, entry_id: int, step: str, facts: Mapping[str, Any] | None = None) -> None:
        """Record a step and merge its facts."""
        added = dict(facts or {})
        with self._transaction():
            row = self._db.execute("SELECT facts FROM actuations WHERE id = ?", (entry_id,))
            merged = {**json.loads(row.fetchone()[0]), **added}
            self._db.execute(
                "UPDATE actuations SET step = ?, facts = ? WHERE id = ?",
                (step, _json(merged), entry_id),
            )
            self._db.execute(
                "INSERT INTO actuation_steps VALUES (?, ?, ?, ?)",
                (entry_id, self._now(), step, _json(added)),
            )

    def finish(
        self, entry_id: int, state: str, outcome: str, timings: Mapping[str, float]
    ) -> JournalEntry:
        """Close an entry."""
        now = self._now()
        with self._transaction():
            self._db.execute(
                "UPDATE actuations SET state = ?, step = ?, finished_at = ?, outcome = ?,"
                " timings = ? WHERE id = ?",
                (state, state, now, outcome, _json(timings), entry_id),
            )
            self._db.execute(
                "INSERT INTO actuation_steps VALUES (?, ?, ?, '{}')", (entry_id, now, state)
            )
        entry = self._entry(entry_id)
        assert entry is not None
        return entry

    def record(
        self,
        target: str,
        policy: str,
        *,
        state: str,
        outcome: str,
        plan: Mapping[str, Any],
        timings: Mapping[str, float],
    ) -> JournalEntry:
        """Record a change that ends without being opened."""
        now = self._now()
        with self._transaction():
            cursor = self._db.execute(
                "INSERT INTO actuations (target, policy, state, step, plan, facts, started_at,"
                " finished_at, outcome, timings) VALUES (?, ?, ?, ?, ?, '{}', ?, ?, ?, ?)",
                (target, policy, state, state, _json(plan), now, now, outcome, _json(timings)),
            )
        assert cursor.lastrowid is not None
        entry = self._entry(cursor.lastrowid)
        assert entry is not None
        return entry

    def open_entry(self, target: str) -> JournalEntry | None:
        """The open entry of ``target``."""
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM actuations WHERE target = ? AND state = ?",  # noqa: S608 - constant columns
            (target, OPEN),
        ).fetchone()
        return None if row is None else _entry_of(row)

    def steps(self, entry_id: int) -> list[tuple[datetime, str]]:
        """The steps of an entry, in order."""
        rows = self._db.execute(
            "SELECT at, step FROM actuation_steps WHERE actuation = ? ORDER BY rowid", (entry_id,)
        )
        return [(_time(at), step) for at, step in rows]

    def applied_since(self, target: str, since: datetime) -> list[JournalEntry]:
        """Changes that restarted ``target`` since ``since``."""
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM actuations WHERE target = ? AND state IN ('done', 'reverted')"  # noqa: S608 - constant columns
            " AND finished_at >= ? ORDER BY id",
            (target, since.timestamp()),
        )
        return [_entry_of(row) for row in rows]

    def recent(self, limit: int = 20) -> list[JournalEntry]:
        """The newest entries, newest first."""
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM actuations ORDER BY id DESC LIMIT ?",  # noqa: S608 - constant columns
            (limit,),
        )
        return [_entry_of(row) for row in rows]

    def entry(self, entry_id: int) -> JournalEntry | None:
        """One entry by id."""
        return self._entry(entry_id)

    def quarantine(self, policy: str, target: str, reason: str, actuation: int | None) -> None:
        """Stop ``policy`` from acting on ``target`` until people lift it."""
        with self._transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO quarantine VALUES (?, ?, ?, ?, ?)",
                (policy, target, self._now(), reason, actuation),
            )

    def quarantined(self) -> dict[tuple[str, str], str]:
        """(policy, target) -> why, for every quarantined pair."""
        rows = self._db.execute("SELECT policy, target, reason FROM quarantine")
        return {(policy, target): reason for policy, target, reason in rows}

    def propose(self, request: ChangeRequest) -> int:
        """Record an approval-risk intent as a pending proposal; returns its id."""
        with self._transaction():
            cursor = self._db.execute(
                "INSERT INTO proposals (at, policy, target, state, changes, current, reason,"
                " evidence, risk) VALUES (?, ?, ?, 'proposed', ?, ?, ?, ?, ?)",
                (
                    self._now(),
                    request.policy,
                    request.target,
                    _json(request.changes),
                    _json(request.current),
                    request.reason,
                    _json(request.evidence),
                    request.risk,
                ),
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def proposals(self) -> list[dict[str, Any]]:
        """Every proposal, newest first."""
        rows = self._db.execute(
            "SELECT id, at, policy, target, state, changes, current, reason FROM proposals"
            " ORDER BY id DESC"
        )
        return [
            {
                "id": row[0],
                "at": row[1],
                "policy": row[2],
                "target": row[3],
                "state": row[4],
                "changes": json.loads(row[5]),
                "current": json.loads(row[6]),
                "reason": row[7],
            }
            for row in rows
        ]

    def _entry(self, entry_id: int) -> JournalEntry | None:
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM actuations WHERE id = ?",  # noqa: S608 - constant columns
            (entry_id,),
        ).fetchone()
        return None if row is None else _entry_of(row)

    def _now(self) -> float:
        return self._clock.wall().timestamp()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")


def _entry_of(row: tuple[Any, ...]) -> JournalEntry:
    entry_id, target, policy, state, step, plan, facts, started, finished, outcome, timings = row
    return JournalEntry(
        id=entry_id,
        target=target,
        policy=policy,
        state=state,
        step=step,
        plan=json.loads(plan),
        facts=json.loads(facts),
        started_at=_time(started),
        finished_at=None if finished is None else _time(finished),
        outcome=outcome,
        timings=json.loads(timings),
    )


def _time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)
