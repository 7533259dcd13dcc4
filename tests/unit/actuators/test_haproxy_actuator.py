"""The HAProxy actuator's verify-and-revert paths, with a gate that misbehaves on purpose.

A real HAProxy always reads back what it was told (tests/contract/test_haproxy_actuator.py);
what it does when the gate does not, or fails half-way, needs a gate that can be made to.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from actuators.haproxy.actuator import HaproxyActuator
from daemon.api import (
    CAP_APPLIED,
    CAP_FAILED,
    CAP_REVERTED,
    CapResult,
    ChangeRequest,
    GovernorError,
    SystemClock,
    VllmInstance,
)
from daemon.core.gate_actuation import cap_request
from daemon.engine.storage.journal_store import SqliteJournal

pytestmark = pytest.mark.asyncio
INSTANCE = VllmInstance(name="main", url="http://127.0.0.1:1")


class Gate:
    """A gate holding a cap; ``ignore`` makes writes of those values do nothing."""

    def __init__(self, cap: int | None, *, ignore: set[int], fail_writes: bool = False) -> None:
        self.cap = cap
        self.ignore = ignore
        self.fail_writes = fail_writes
        self.writes: list[int] = []

    @property
    def where(self) -> str:
        return "test-gate"

    async def read_cap(self) -> int | None:
        return self.cap

    async def write_cap(self, cap: int) -> int | None:
        self.writes.append(cap)
        if self.fail_writes:
            message = "connection reset"
            raise GovernorError(message)
        if cap not in self.ignore:
            self.cap = cap
        return self.cap


class Journal:
    def __init__(self) -> None:
        self.rows: list[tuple[CapResult, str]] = []

    def record(self, result: CapResult, reason: str) -> None:
        self.rows.append((result, reason))


class Clock:
    def monotonic(self) -> float:
        return 0.0

    def wall(self) -> datetime:
        return datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def changes(tmp_path: Path) -> Iterator[SqliteJournal]:
    """The engine's journal of changes: nothing in flight."""
    journal = SqliteJournal(tmp_path / "state.sqlite3", SystemClock())
    yield journal
    journal.close()


async def set_cap(
    tmp_path: Path, changes: SqliteJournal, journal: Journal, gate: Gate, request: ChangeRequest
) -> CapResult:
    """One change through the actuator protocol's ``apply``, read back as the gate's outcome."""
    actuator = HaproxyActuator(
        journal, Clock(), tmp_path, gates=lambda _instance: gate, changes=changes
    )
    return CapResult.of(await actuator.apply(INSTANCE, request))


CUT = cap_request("main", "admission-cap", 4, 16, "ttft over budget")


async def test_a_cap_read_back_as_asked_is_applied(tmp_path: Path, changes: SqliteJournal) -> None:
    journal = Journal()
    gate = Gate(16, ignore=set())
    result = await set_cap(tmp_path, changes, journal, gate, CUT)
    assert (result.state, result.before, result.after) == (CAP_APPLIED, 16, 4)
    assert [(r.state, reason) for r, reason in journal.rows] == [(CAP_APPLIED, CUT.reason)]


async def test_a_cap_not_read_back_is_set_back_and_journaled_as_reverted(
    tmp_path: Path, changes: SqliteJournal
) -> None:
    journal = Journal()
    gate = Gate(16, ignore={4})
    result = await set_cap(tmp_path, changes, journal, gate, CUT)
    assert result.state == CAP_REVERTED
    assert gate.writes == [4, 16]
    assert gate.cap == 16
    assert "read back 16" in result.outcome
    assert [r.state for r, _ in journal.rows] == [CAP_REVERTED]


async def test_a_failing_write_and_a_failing_revert_is_failed(
    tmp_path: Path, changes: SqliteJournal
) -> None:
    journal = Journal()
    gate = Gate(16, ignore=set(), fail_writes=True)
    result = await set_cap(tmp_path, changes, journal, gate, CUT)
    assert result.state == CAP_FAILED
    assert gate.writes == [4, 16]
    assert "setting 16 back failed too" in result.outcome
    assert [r.state for r, _ in journal.rows] == [CAP_FAILED]


async def test_a_server_without_a_cap_cannot_be_set_back(
    tmp_path: Path, changes: SqliteJournal
) -> None:
    journal = Journal()
    gate = Gate(None, ignore={4})
    result = await set_cap(tmp_path, changes, journal, gate, CUT)
    assert result.state == CAP_FAILED
    assert gate.writes == [4]  # 0 ("no limit") is never sent
    assert "no cap to go back to" in result.outcome


async def test_a_change_for_another_instance_is_refused(
    tmp_path: Path, changes: SqliteJournal
) -> None:
    other = cap_request("other", "admission-cap", 4, 16, "x")
    gate = Gate(16, ignore=set())
    result = await set_cap(tmp_path, changes, Journal(), gate, other)
    assert result.state == "refused"
    assert gate.writes == []
