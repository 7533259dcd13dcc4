"""The actuation journal, the quarantine list and the pending proposals, in the state database.

The journal is write-ahead: an entry is opened (with the plan, which holds the last-known-good
files in full) before the first byte of a config file is written, every step is appended as it
is reached, and the entry is closed with its outcome and per-phase timings. A partial unique
index allows one *open* entry per server: "one change in flight per instance", enforced by
SQLite across processes and restarts rather than by memory. Closed entries are the audit log of
changes. Times are wall-clock seconds (the journal must mean something after a reboot).

Tables::

    actuations(id, target, policy, state, step, plan JSON, facts JSON, started_at,
               finished_at, outcome, timings JSON, forecast JSON)
                                                        one row per change, open or finished;
                                                        forecast: a tuned change's what-if
                                                        (version 2; NULL for other changes)
    actuation_steps(actuation, at, step, facts JSON)    every step of every change, in order
    quarantine(policy, target, since, reason, actuation) policies whose change was reverted
    quarantine_lifts(policy, target, since, reason, actuation, lifted_at, lifted_by, why)
                                                        every quarantine people lifted, and why

Proposals waiting for people have their own tables (:mod:`daemon.engine.storage.proposal_store`); a
``proposals`` table left by an older governor is no longer read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon.core.actuation import APPLIED_STATES, OPEN, JournalEntry, JournalState
from daemon.core.clock import Clock
from daemon.core.errors import ChangeInFlight
from daemon.engine.storage.state_db import Schema, connect, transaction

SCHEMA = Schema(
    "actuations",
    (
        """
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
CREATE TABLE IF NOT EXISTS quarantine_lifts (
    policy TEXT NOT NULL, target TEXT NOT NULL, since REAL NOT NULL, reason TEXT NOT NULL,
    actuation INTEGER, lifted_at REAL NOT NULL, lifted_by TEXT NOT NULL, why TEXT NOT NULL
);
""",
        # 2: a tuned change carries the what-if's counterfactual into the audit log (issue 16).
        "ALTER TABLE actuations ADD COLUMN forecast TEXT;",
    ),
)

_APPLIED = ", ".join("?" for _ in APPLIED_STATES)  # placeholders, one per applied state
_COLUMNS = (
    "id, target, policy, state, step, plan, facts, started_at, finished_at, outcome, timings,"
    " forecast"
)


class SqliteJournal:
    """The engine's :class:`~daemon.core.actuation.ActuationJournal`, and its neighbours."""

    def __init__(self, path: Path, clock: Clock) -> None:
        self._clock = clock
        self._db = connect(path, SCHEMA)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def begin(
        self,
        target: str,
        policy: str,
        plan: Mapping[str, Any],
        facts: Mapping[str, Any],
        forecast: Mapping[str, Any] | None = None,
    ) -> JournalEntry:
        """Open an entry at step ``planned``; see the protocol."""
        now = self._now()
        kept = None if forecast is None else _json(forecast)
        try:
            with self._transaction():
                cursor = self._db.execute(
                    "INSERT INTO actuations (target, policy, state, step, plan, facts, started_at,"
                    " forecast) VALUES (?, ?, ?, 'planned', ?, ?, ?, ?)",
                    (target, policy, OPEN, _json(plan), _json(facts), now, kept),
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

    def note(self, entry_id: int, facts: Mapping[str, Any]) -> None:
        """Merge facts into an entry without a new step."""
        with self._transaction():
            row = self._db.execute("SELECT facts FROM actuations WHERE id = ?", (entry_id,))
            merged = {**json.loads(row.fetchone()[0]), **facts}
            self._db.execute(
                "UPDATE actuations SET facts = ? WHERE id = ?", (_json(merged), entry_id)
            )

    def finish(
        self, entry_id: int, state: JournalState, outcome: str, timings: Mapping[str, float]
    ) -> JournalEntry:
        """Close an entry (a string that is not a finished state is refused, not stored)."""
        state = _finished(state)
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
        state: JournalState,
        outcome: str,
        plan: Mapping[str, Any],
        timings: Mapping[str, float],
    ) -> JournalEntry:
        """Record a change that ends without being opened (its state checked as in finish)."""
        state = _finished(state)
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
            f"SELECT {_COLUMNS} FROM actuations WHERE target = ? AND state IN ({_APPLIED})"  # noqa: S608 - constant columns
            " AND finished_at >= ? ORDER BY id",
            (target, *APPLIED_STATES, since.timestamp()),
        )
        return [_entry_of(row) for row in rows]

    def last_finished(self, target: str, policy: str, since: datetime) -> JournalEntry | None:
        """The newest finished change of ``target`` for ``policy`` begun at or after ``since``."""
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM actuations WHERE target = ? AND policy = ? AND state != ?"  # noqa: S608 - constant columns
            " AND started_at >= ? ORDER BY id DESC LIMIT 1",
            (target, policy, OPEN, since.timestamp()),
        ).fetchone()
        return None if row is None else _entry_of(row)

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

    def quarantine_list(self) -> list[dict[str, Any]]:
        """Every quarantined pair with when, why and the change that caused it, oldest first."""
        rows = self._db.execute(
            "SELECT policy, target, since, reason, actuation FROM quarantine ORDER BY since"
        )
        return [
            {"policy": p, "target": t, "since": _time(s).isoformat(), "reason": r, "actuation": a}
            for p, t, s, r, a in rows
        ]

    def lift_quarantine(self, policy: str, target: str, *, by: str, why: str) -> bool:
        """Let ``policy`` act on ``target`` again; audited. False when it was not quarantined."""
        with self._transaction():
            row = self._db.execute(
                "SELECT since, reason, actuation FROM quarantine WHERE policy = ? AND target = ?",
                (policy, target),
            ).fetchone()
            if row is None:
                return False
            self._db.execute(
                "INSERT INTO quarantine_lifts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (policy, target, *row, self._now(), by, why),
            )
            self._db.execute(
                "DELETE FROM quarantine WHERE policy = ? AND target = ?", (policy, target)
            )
        return True

    def quarantine_lifts(self) -> list[dict[str, Any]]:
        """The audit of lifted quarantines, newest first."""
        rows = self._db.execute(
            "SELECT policy, target, reason, actuation, lifted_at, lifted_by, why"
            " FROM quarantine_lifts ORDER BY rowid DESC"
        )
        return [
            {
                "policy": p,
                "target": t,
                "reason": r,
                "actuation": a,
                "lifted_at": _time(at).isoformat(),
                "lifted_by": by,
                "why": why,
            }
            for p, t, r, a, at, by, why in rows
        ]

    def quarantined(self) -> dict[tuple[str, str], str]:
        """(policy, target) -> why, for every quarantined pair."""
        rows = self._db.execute("SELECT policy, target, reason FROM quarantine")
        return {(policy, target): reason for policy, target, reason in rows}

    def _entry(self, entry_id: int) -> JournalEntry | None:
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM actuations WHERE id = ?",  # noqa: S608 - constant columns
            (entry_id,),
        ).fetchone()
        return None if row is None else _entry_of(row)

    def _now(self) -> float:
        return self._clock.wall().timestamp()

    def _transaction(self) -> AbstractContextManager[None]:
        return transaction(self._db)


def _entry_of(row: tuple[Any, ...]) -> JournalEntry:
    (
        entry_id,
        target,
        policy,
        state,
        step,
        plan,
        facts,
        started,
        finished,
        outcome,
        timings,
        forecast,
    ) = row
    return JournalEntry(
        id=entry_id,
        target=target,
        policy=policy,
        state=JournalState(state),
        step=step,
        plan=json.loads(plan),
        facts=json.loads(facts),
        started_at=_time(started),
        finished_at=None if finished is None else _time(finished),
        outcome=outcome,
        timings=json.loads(timings),
        forecast=None if forecast is None else json.loads(forecast),
    )


def _finished(state: str) -> JournalState:
    """``state`` as a finished state.

    Raises:
        ValueError: It is not a state, or it is ``open`` (only :meth:`SqliteJournal.begin`
            opens an entry).
    """
    finished = JournalState(state)
    if finished is OPEN:
        message = "an entry is finished or recorded in a finished state, not 'open'"
        raise ValueError(message)
    return finished


def _time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)
