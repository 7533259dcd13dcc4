from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actuators.vllm.atomic_files import atomic_write, remove_stray_temporaries, snapshot
from daemon.api import ConfigWriteError

ROOT = Path(__file__).resolve().parents[3]

# A writer that blocks in fsync, after the temporary file is written and before the rename:
# the moment a crash would hurt if the write were not atomic.
BLOCKED_WRITER = """
import os, sys, time
from pathlib import Path
os.fsync = lambda fd: time.sleep(600)
from actuators.vllm.atomic_files import atomic_write
atomic_write(Path(sys.argv[1]), "max-num-seqs: 999\\n" * 100000)
"""


def test_a_write_replaces_the_file_and_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "vllm.yaml"
    path.write_text("max-num-seqs: 8\n")
    path.chmod(0o640)
    atomic_write(path, "max-num-seqs: 16\n")
    assert path.read_text() == "max-num-seqs: 16\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vllm.yaml"]


def test_a_new_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "vllm.env"
    assert not snapshot(path).exists
    atomic_write(path, "VLLM_LOGGING_LEVEL=WARNING\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_failed_rename_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "vllm.yaml"
    path.write_text("max-num-seqs: 8\n")

    def failing_replace(self: Path, target: Path) -> Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "replace", failing_replace)
    with pytest.raises(ConfigWriteError, match="the old file is intact"):
        atomic_write(path, "max-num-seqs: 16\n")
    assert path.read_text() == "max-num-seqs: 8\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vllm.yaml"]


def test_a_writer_killed_mid_write_never_leaves_a_half_written_file(tmp_path: Path) -> None:
    path = tmp_path / "vllm.yaml"
    path.write_text("max-num-seqs: 8\n")
    writer = subprocess.Popen(
        [sys.executable, "-c", BLOCKED_WRITER, str(path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 20
        while not list(tmp_path.glob(".vllm-governor-*.tmp")) and time.monotonic() < deadline:
            assert writer.poll() is None, "the writer ended early"
            time.sleep(0.01)
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=10)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert path.read_text() == "max-num-seqs: 8\n", "the old file is whole"
    [stray] = tmp_path.glob(".vllm-governor-*.tmp")
    assert remove_stray_temporaries(path) == [stray]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vllm.yaml"]
