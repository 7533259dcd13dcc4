"""Journal states are an enum on every path, and the strings older governors stored stay valid."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon.core.actuation import (
    DONE,
    FAILED,
    OPEN,
    REVERTED,
    ActuationResult,
    JournalEntry,
    JournalState,
)
from daemon.core.gate_actuation import CapResult, CapState
from daemon.engine.storage.journal_store import SqliteJournal


class FixedClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

    def monotonic(self) -> float:
        return 0.0

    def wall(self) -> datetime:
        return self.now


def test_states_stored_as_bare_strings_read_back_as_members(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    clock = FixedClock()
    SqliteJournal(path, clock).close()
    # Rows as an older governor wrote them: the state is plain text.
    at = clock.now.timestamp()
    with sqlite3.connect(path) as db:
        for target, state in (("a", "done"), ("a", "reverted"), ("a", "refused"), ("b", "open")):
            db.execute(
                "INSERT INTO actuations (target, policy, state, step, plan, facts, started_at,"
                " finished_at) VALUES (?, 'p', ?, ?, '{}', '{}', ?, ?)",
                (target, state, state, at, None if state == "open" else at),
            )
    journal = SqliteJournal(path, clock)
    try:
        open_entry = journal.open_entry("b")
        assert open_entry is not None
        assert open_entry.state is OPEN
        applied = journal.applied_since("a", clock.now - timedelta(hours=1))
        assert [entry.state for entry in applied] == [DONE, REVERTED]
        assert all(type(entry.state) is JournalState for entry in journal.recent(10))
        # The partial unique index still reads the stored text: one open change per target.
        assert journal.begin("a", "p", {}, {}).state is OPEN
    finally:
        journal.close()


def test_a_state_that_is_not_one_is_refused_and_never_stored(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "state.sqlite3", FixedClock())
    try:
        entry = journal.begin("main", "p", {}, {})
        for wrong in ("revertd", "open"):
            with pytest.raises(ValueError, match=wrong):
                journal.finish(entry.id, wrong, "typo", {})  # type: ignore[arg-type]
        still = journal.open_entry("main")
        assert still is not None
        assert still.state is OPEN, "the entry stays open, as it was"
        with pytest.raises(ValueError, match="dryrun"):
            journal.record("x", "p", state="dryrun", outcome="", plan={}, timings={})  # type: ignore[arg-type]
        assert [e.target for e in journal.recent(10)] == ["main"]
    finally:
        journal.close()


def test_results_hold_members_whatever_their_caller_passed() -> None:
    # The approvals runner built its failures with the bare string "failed".
    result = ActuationResult("main", "p", "failed", "no such server")  # type: ignore[arg-type]
    assert result.state is FAILED
    with pytest.raises(ValueError, match="faild"):
        ActuationResult("main", "p", "faild", "typo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="closed"):
        JournalEntry(1, "main", "p", "closed", "x", {}, {}, datetime.now(UTC))  # type: ignore[arg-type]
    assert CapResult("main", "p", "applied", 4, 8, "").state is CapState.APPLIED  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="aplied"):
        CapResult("main", "p", "aplied", 4, 8, "")  # type: ignore[arg-type]
