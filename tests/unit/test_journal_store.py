from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon.core.actuation import DONE, REFUSED
from daemon.core.errors import ChangeInFlight
from daemon.engine.storage.journal_store import SqliteJournal


class FixedClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

    def monotonic(self) -> float:
        return 0.0

    def wall(self) -> datetime:
        return self.now


def test_one_open_change_per_server_survives_a_reopened_database(tmp_path: Path) -> None:
    clock = FixedClock()
    path = tmp_path / "state.sqlite3"
    journal = SqliteJournal(path, clock)
    entry = journal.begin(
        "main", "p", {"knobs": {"max_num_seqs": [8, 16]}}, {"baseline_start": 1.5}
    )
    journal.step(entry.id, "written", {"written_at": 2.0})
    journal.close()
    # Another process (or the next start) sees the open entry and cannot open a second one.
    journal = SqliteJournal(path, clock)
    with pytest.raises(ChangeInFlight):
        journal.begin("main", "q", {}, {})
    journal.begin("other", "q", {}, {})
    found = journal.open_entry("main")
    assert found is not None
    assert found.step == "written"
    assert found.facts == {"baseline_start": 1.5, "written_at": 2.0}
    assert [step for _, step in journal.steps(entry.id)] == ["planned", "written"]
    clock.now += timedelta(seconds=30)
    done = journal.finish(entry.id, DONE, "applied", {"restart": 3.5})
    assert done.timings == {"restart": 3.5}
    assert done.finished_at == clock.now
    assert journal.open_entry("main") is None
    assert [e.id for e in journal.applied_since("main", clock.now - timedelta(hours=1))] == [
        entry.id
    ]
    journal.begin("main", "q", {}, {})  # the next change may start
    journal.close()


def test_refusals_and_quarantine_are_kept(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "state.sqlite3", FixedClock())
    refused = journal.record("main", "p", state=REFUSED, outcome="frozen", plan={}, timings={})
    assert refused.state == "refused"
    assert journal.open_entry("main") is None
    journal.quarantine("p", "main", "reverted: ttft worse", refused.id)
    assert journal.quarantined() == {("p", "main"): "reverted: ttft worse"}
    journal.close()
