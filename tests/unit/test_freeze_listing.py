"""The freezes in force, read from the state directory: what ``status`` and ``freezes`` list."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from daemon.core.freezes import freeze_reason, freezes_in_force

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def write_freeze(directory: Path, target: str, until: datetime, reason: str) -> None:
    """A file as ``vllm-governor freeze`` writes it (expiry, then reason and who)."""
    name = "freeze" if target == "*" else f"freeze.{target}"
    (directory / name).write_text(f"{until.isoformat()}\n{reason}\n", encoding="utf-8")


def test_the_daemons_files_give_target_who_why_and_until(tmp_path: Path) -> None:
    until = NOW + timedelta(hours=2)
    write_freeze(tmp_path, "main", until, "incident 42 (by unix:alice)")
    write_freeze(tmp_path, "*", until, "change window (by slack:U123)")
    listed = [freeze.as_json() for freeze in freezes_in_force(tmp_path, NOW)]
    assert listed == [
        {"target": "*", "by": "slack:U123", "reason": "change window",
         "until": until.isoformat(), "file": str(tmp_path / "freeze")},
        {"target": "main", "by": "unix:alice", "reason": "incident 42",
         "until": until.isoformat(), "file": str(tmp_path / "freeze.main")},
    ]  # fmt: skip
    # The list and the actuators' check read the same files alike.
    assert freeze_reason(tmp_path, "main", NOW)


def test_expired_scratch_and_other_files_are_not_freezes(tmp_path: Path) -> None:
    write_freeze(tmp_path, "old", NOW - timedelta(seconds=1), "over")
    (tmp_path / "freeze.main.new").write_text("half written\n")
    (tmp_path / "freezer").write_text("not a freeze\n")
    (tmp_path / "state.db").write_text("")
    assert freezes_in_force(tmp_path, NOW) == []
    assert freezes_in_force(tmp_path / "missing", NOW) == []


def test_a_hand_made_freeze_counts_until_its_file_goes(tmp_path: Path) -> None:
    (tmp_path / "freeze").touch()
    (tmp_path / "freeze.b").write_text("disk swap tonight\n")
    listed = {freeze.target: freeze for freeze in freezes_in_force(tmp_path, NOW)}
    assert listed["*"].until is None
    assert (listed["*"].reason, listed["*"].by) == ("", "")
    assert listed["b"].reason == "disk swap tonight"
    assert listed["b"].as_json()["until"] is None
