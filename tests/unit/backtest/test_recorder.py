"""The recorder: a JSON line per tick, flushed at once, rotated by size, never fatal."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.app.backtest.recording import read_recording
from daemon.core.recording_settings import MIN_BYTES, RecordingSection
from daemon.engine.evaluation.recorder import Recorder
from daemon.policy.evaluate import TargetView

WALL = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
VIEWS = {
    "main": TargetView(
        "main", {"running": 12.0, "gpu_power_watts": {"0": 300.0}}, {"max_num_seqs": 256.0}
    )
}


def test_each_tick_is_one_line_readable_before_the_file_is_closed(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "rec.jsonl"
    recorder = Recorder(lambda: RecordingSection(enabled=True, path=path))
    recorder.record(WALL, 5.0, VIEWS)
    recorder.record(WALL, 10.0, VIEWS)
    # Still open: what is on disk is already whole (flushed per line).
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first["monotonic"] == 5.0
    assert first["wall"] == "2026-11-29T10:00:00+00:00"
    assert first["targets"]["main"] == {
        "signals": {"running": 12.0, "gpu_power_watts": {"0": 300.0}},
        "knobs": {"max_num_seqs": 256.0},
    }
    recorder.close()
    ticks = read_recording([path]).ticks
    assert [tick.monotonic for tick in ticks] == [5.0, 10.0]
    assert ticks[0].views["main"] == VIEWS["main"]


def test_nothing_is_written_while_disabled(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    recorder = Recorder(lambda: RecordingSection(enabled=False, path=path))
    recorder.record(WALL, 5.0, VIEWS)
    assert not path.exists()


def test_the_file_rotates_and_the_recording_stays_bounded(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    settings = RecordingSection(enabled=True, path=path, max_bytes=MIN_BYTES, keep_files=2)
    recorder = Recorder(lambda: settings)
    for index in range(2000):  # about 0.2 MB of lines: several rotations
        recorder.record(WALL, float(index), VIEWS)
    recorder.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["rec.jsonl", "rec.jsonl.1", "rec.jsonl.2"]
    assert all((tmp_path / name).stat().st_size <= MIN_BYTES for name in files)
    # Oldest first, the kept files are one unbroken, ordered stretch ending at the last tick.
    kept = read_recording([path.with_name("rec.jsonl.2"), path.with_name("rec.jsonl.1"), path])
    times = [tick.monotonic for tick in kept.ticks]
    assert times == sorted(times)
    assert times[-1] == 1999.0
    assert times == [float(t) for t in range(int(times[0]), 2000)]


def test_a_line_torn_by_a_crash_is_ended_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    settings = RecordingSection(enabled=True, path=path)
    recorder = Recorder(lambda: settings)
    recorder.record(WALL, 1.0, VIEWS)
    recorder.close()
    with path.open("a") as file:
        file.write('{"format":1,"wall":"2026-11-')  # the daemon died mid-line
    again = Recorder(lambda: settings)
    again.record(WALL, 2.0, VIEWS)
    again.close()
    recording = read_recording([path])
    assert [tick.monotonic for tick in recording.ticks] == [1.0, 2.0]
    assert len(recording.warnings) == 1
    assert recording.warnings[0].startswith(f"{path}:2: skipped: not a whole JSON line")


def test_a_write_that_fails_is_logged_once_and_never_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    settings = RecordingSection(enabled=True, path=blocker / "rec.jsonl")  # under a file
    recorder = Recorder(lambda: settings)
    with caplog.at_level(logging.ERROR):
        recorder.record(WALL, 1.0, VIEWS)
        recorder.record(WALL, 2.0, VIEWS)
    failures = [r for r in caplog.records if "recording failed" in r.getMessage()]
    assert len(failures) == 1
