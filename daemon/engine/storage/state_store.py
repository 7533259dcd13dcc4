"""The governor's durable memory: policy states, knob histories and the decision log, in SQLite.

One file under ``governor.state_dir``, in WAL mode with ``synchronous=FULL``: a decision the
governor acted on is on disk before it acts again, and a crash loses nothing it needs to stay
correct (``for`` timers, firing states, cooldowns, budgets, dwell times).

Tuned changes awaiting their realised effect are kept too (``tuned_effects``, schema version 2):
a governor restarted meanwhile still measures them, so a bad prediction still quarantines.

Times inside the engine are on the loop's monotonic clock, which means nothing after a reboot.
They are stored as wall-clock seconds and converted back with the offset between the two clocks
at load time, so a cooldown that had 10 minutes left still has them after a restart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.engine.storage.state_db import Schema, connect, transaction
from daemon.policy.decisions import Decision
from daemon.policy.planner import KnobHistory, KnobKey
from daemon.policy.state import Phase, PolicyState
from daemon.policy.tick import StateKey

if TYPE_CHECKING:
    from daemon.whatif.tuned_effects import Expected

SCHEMA = Schema(
    "policies",
    (
        """
CREATE TABLE IF NOT EXISTS policy_state (
    policy TEXT NOT NULL, target TEXT NOT NULL, phase TEXT NOT NULL, since REAL,
    clearing_since REAL, last_action_at REAL, actions TEXT NOT NULL, blocked_by TEXT,
    PRIMARY KEY (policy, target)
);
CREATE TABLE IF NOT EXISTS knob_history (
    target TEXT NOT NULL, knob TEXT NOT NULL, last_change_at REAL, changes TEXT NOT NULL,
    PRIMARY KEY (target, knob)
);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, policy TEXT NOT NULL,
    target TEXT NOT NULL, kind TEXT NOT NULL, guard TEXT, body TEXT NOT NULL
);
""",
        # 2: the tuned changes awaiting their measurement outlive the governor (issue 16).
        """
CREATE TABLE tuned_effects (
    policy TEXT NOT NULL, target TEXT NOT NULL, since REAL NOT NULL, in_force_at REAL,
    body TEXT NOT NULL, PRIMARY KEY (policy, target)
);
""",
    ),
)


class StateStore:
    """SQLite-backed state; ``offset`` converts monotonic times to wall-clock ones (+offset)."""

    def __init__(self, path: Path) -> None:
        self._db = connect(path, SCHEMA)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def load_states(self, offset: float) -> dict[StateKey, PolicyState]:
        """Every persisted policy state, times back on the monotonic clock."""
        rows = self._db.execute(
            "SELECT policy, target, phase, since, clearing_since, last_action_at, actions,"
            " blocked_by FROM policy_state"
        )
        states = {}
        for policy, target, phase, since, clearing, last, actions, blocked in rows:
            states[(policy, target)] = PolicyState(
                Phase(phase),
                _mono(since, offset),
                _mono(clearing, offset),
                _mono(last, offset),
                tuple(at - offset for at in json.loads(actions)),
                blocked,
            )
        return states

    def save_states(self, states: Mapping[StateKey, PolicyState], offset: float) -> None:
        """Write the given states (only those that changed need passing), in one transaction."""
        rows = [
            (
                policy,
                target,
                state.phase.value,
                _wall(state.since, offset),
                _wall(state.clearing_since, offset),
                _wall(state.last_action_at, offset),
                json.dumps([at + offset for at in state.actions]),
                state.blocked_by,
            )
            for (policy, target), state in states.items()
        ]
        with self._transaction():
            self._db.executemany(
                "INSERT OR REPLACE INTO policy_state VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
            )

    def forget_policies(self, keep: Iterable[str]) -> None:
        """Drop the state of policies that no longer exist."""
        names = list(keep)
        marks = ",".join("?" * len(names)) or "''"
        with self._transaction():
            self._db.execute(f"DELETE FROM policy_state WHERE policy NOT IN ({marks})", names)  # noqa: S608 - marks are only "?"

    def load_history(self, offset: float) -> dict[KnobKey, KnobHistory]:
        """Every knob's change history."""
        rows = self._db.execute("SELECT target, knob, last_change_at, changes FROM knob_history")
        return {
            (target, knob): KnobHistory(
                _mono(last, offset), tuple(at - offset for at in json.loads(changes))
            )
            for target, knob, last, changes in rows
        }

    def save_history(self, key: KnobKey, history: KnobHistory, offset: float) -> None:
        """Record a knob's history after a change was applied."""
        row = (
            *key,
            _wall(history.last_change_at, offset),
            json.dumps([at + offset for at in history.changes]),
        )
        with self._transaction():
            self._db.execute("INSERT OR REPLACE INTO knob_history VALUES (?, ?, ?, ?)", row)

    def record(self, decisions: Iterable[Decision], offset: float) -> None:
        """Append decisions to the log, with their evidence."""
        rows = [
            (
                decision.at + offset,
                decision.policy,
                decision.target,
                decision.kind.value,
                decision.guard,
                json.dumps(_body(decision), default=str),
            )
            for decision in decisions
        ]
        if rows:
            with self._transaction():
                self._db.executemany(
                    "INSERT INTO decisions (at, policy, target, kind, guard, body)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    rows,
                )

    def load_effects(self, offset: float) -> list[Expected]:
        """The tuned changes a previous run awaited, times back on the monotonic clock."""
        # The what-if brings the simulator with it: only a governor that tunes pays for it.
        from daemon.whatif.tuned_effects import Expected  # noqa: PLC0415 - see above

        rows = self._db.execute(
            "SELECT policy, target, since, in_force_at, body FROM tuned_effects"
            " ORDER BY policy, target"
        )
        return [
            Expected.from_json(policy, target, json.loads(body), since - offset, _mono(at, offset))
            for policy, target, since, at, body in rows
        ]

    def save_effects(self, waiting: Iterable[Expected], offset: float) -> None:
        """Make ``waiting`` the tuned changes awaited, in one transaction."""
        rows = [
            (
                expected.policy,
                expected.target,
                expected.since + offset,
                _wall(expected.in_force_at, offset),
                json.dumps(expected.to_json(), default=str),
            )
            for expected in waiting
        ]
        with self._transaction():
            self._db.execute("DELETE FROM tuned_effects")
            self._db.executemany("INSERT INTO tuned_effects VALUES (?, ?, ?, ?, ?)", rows)

    def recent_decisions(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest decisions, newest first, as stored."""
        rows = self._db.execute(
            "SELECT at, policy, target, kind, guard, body FROM decisions ORDER BY id DESC LIMIT ?",
            (limit,),
        )
        return [
            {
                "at": at,
                "policy": policy,
                "target": target,
                "kind": kind,
                "guard": guard,
                **json.loads(body),
            }
            for at, policy, target, kind, guard, body in rows
        ]

    def _transaction(self) -> AbstractContextManager[None]:
        return transaction(self._db)


def _body(decision: Decision) -> dict[str, Any]:
    body: dict[str, Any] = {"evidence": asdict(decision.evidence), "details": decision.details}
    if decision.intent is not None:
        body["intent"] = asdict(decision.intent)
    return body


def _wall(mono: float | None, offset: float) -> float | None:
    return None if mono is None else mono + offset


def _mono(wall: float | None, offset: float) -> float | None:
    return None if wall is None else wall - offset
