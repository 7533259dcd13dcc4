"""Reading recordings back: whole lines count, a torn or foreign line is skipped and located."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.app.backtest.errors import BacktestError
from daemon.app.backtest.recording import read_recording
from tests.unit.backtest.worlds import write_recording


def test_a_torn_last_line_is_skipped_with_its_file_and_line(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "rec.jsonl", [{"running": 1.0}] * 3)
    whole = path.read_text()
    path.write_text(whole + whole.splitlines()[0][:40])  # no newline: the crash came mid-write
    recording = read_recording([path])
    assert len(recording.ticks) == 3
    assert len(recording.warnings) == 1
    assert recording.warnings[0].startswith(f"{path}:4: skipped: not a whole JSON line")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"format": 2, "wall": "x"}', "not a recording line of format 1"),
        ("[1, 2]", "not a recording line of format 1"),
        ('{"format": 1, "monotonic": 1, "targets": {}}', "without a usable wall"),
        (
            '{"format": 1, "wall": "2026-11-29T10:00:00", "monotonic": 1, "targets": {}}',
            "no time zone",
        ),
        (
            '{"format": 1, "wall": "2026-11-29T10:00:00Z", "monotonic": 1, '
            '"targets": {"main": {"signals": {"running": "12"}, "knobs": {}}}}',
            "not a number",
        ),
    ],
)
def test_a_line_that_is_not_a_record_is_skipped_and_said(
    tmp_path: Path, line: str, expected: str
) -> None:
    path = write_recording(tmp_path / "rec.jsonl", [{"running": 1.0}])
    with path.open("a") as file:
        file.write(line + "\n")
    recording = read_recording([path])
    assert len(recording.ticks) == 1
    assert recording.warnings[0].startswith(f"{path}:2: skipped: ")
    assert expected in recording.warnings[0]


def test_files_are_read_in_the_order_given(tmp_path: Path) -> None:
    older = write_recording(tmp_path / "rec.jsonl.1", [{"running": 1.0}], monotonic_start=10.0)
    newer = write_recording(tmp_path / "rec.jsonl", [{"running": 2.0}], monotonic_start=20.0)
    ticks = read_recording([older, newer]).ticks
    assert [tick.views["main"].signals["running"] for tick in ticks] == [1.0, 2.0]


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(BacktestError, match=r"nope\.jsonl: cannot read the recording"):
        read_recording([tmp_path / "nope.jsonl"])
