"""The recorder: what the policies saw at each tick, one JSON line per tick, for backtests.

A line is ``{"format": 1, "wall": ISO-8601, "monotonic": seconds, "targets": {TARGET:
{"signals": {...}, "knobs": {...}}}}``: exactly the views the evaluator handed to the policies
(a signal without fresh data is absent, as in the view). ``vllm-governor backtest`` reads it
back (:mod:`daemon.app.backtest.recording`), and its Prometheus import writes the same lines
with :func:`encode_tick`.

The file is append-only and each line is flushed as it is written, so a crash loses at most
the line being written; a torn line left by a crash is ended before the next line is
appended, so it spoils only itself. When the next line would take the file past
``max_bytes``, it is rotated (``path`` → ``path.1`` → ``path.2``..., ``keep_files`` kept).
Recording must never stop the governor: a write that fails is logged (once per kind of
failure) and the evaluator goes on.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from daemon.core.recording_settings import RecordingSection
from daemon.policy.evaluate import TargetView

log = logging.getLogger(__name__)

FORMAT = 1


def encode_tick(wall: datetime, monotonic: float, views: Mapping[str, TargetView]) -> str:
    """One recording line (with its newline) for the views of one tick."""
    targets = {
        name: {"signals": _finite(view.signals), "knobs": _finite(view.knobs)}
        for name, view in views.items()
    }
    record = {"format": FORMAT, "wall": wall.isoformat(), "monotonic": monotonic}
    return json.dumps({**record, "targets": targets}, separators=(",", ":")) + "\n"


def _finite(values: Mapping[str, Any]) -> dict[str, Any]:
    # Views hold finite numbers only; this keeps the line strict JSON even if one ever did not.
    kept: dict[str, Any] = {}
    for name, value in values.items():
        if isinstance(value, Mapping):
            kept[name] = {k: v for k, v in value.items() if _is_finite(v)}
        elif _is_finite(value):
            kept[name] = value
    return kept


def _is_finite(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


class Recorder:
    """Appends the policies' views to the configured file, rotating it by size."""

    def __init__(self, settings: Callable[[], RecordingSection]) -> None:
        """Record as ``settings()`` says at each tick (a reload may switch it on or off)."""
        self._settings = settings
        self._open: RecordingSection | None = None
        self._file: IO[str] | None = None
        self._size = 0
        self._failing: str | None = None

    def record(self, wall: datetime, monotonic: float, views: Mapping[str, TargetView]) -> None:
        """Append one tick, when recording is enabled; never raises for an I/O problem."""
        settings = self._settings()
        if not settings.enabled:
            self.close()
            return
        line = encode_tick(wall, monotonic, views)
        try:
            self._write(settings, line)
        except OSError as exc:
            self.close()
            self._failed(settings, exc)
            return
        if self._failing is not None:
            self._failing = None
            log.info("recording again", extra={"path": str(settings.path)})

    def _failed(self, settings: RecordingSection, exc: OSError) -> None:
        """Log a failure once per kind (a full disk would otherwise log at every tick)."""
        if self._failing == type(exc).__name__:
            return
        self._failing = type(exc).__name__
        log.error(
            "recording failed; the governor goes on without it",
            extra={"path": str(settings.path), "error": str(exc)},
        )

    def _write(self, settings: RecordingSection, line: str) -> None:
        if self._open != settings:
            self.close()
        if self._file is None:
            self._file = _open_for_append(settings.path)
            self._open, self._size = settings, self._file.tell()
        size = len(line.encode())
        if self._size > 0 and self._size + size > settings.max_bytes:
            self.close()
            _rotate(settings.path, settings.keep_files)
            self._file = _open_for_append(settings.path)
            self._open, self._size = settings, 0
        self._file.write(line)
        self._file.flush()
        self._size += size

    def close(self) -> None:
        """Close the file (the next enabled tick opens it again)."""
        if self._file is not None:
            self._file.close()
        self._file, self._open = None, None


def _open_for_append(path: Path) -> IO[str]:
    """Open ``path`` for appending, first ending a line torn by a crash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torn = False
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as existing:
            existing.seek(-1, 2)
            torn = existing.read(1) != b"\n"
    file = path.open("a", encoding="utf-8")
    if torn:
        # The torn line stays (the reader skips it with a warning); the new lines start clean.
        file.write("\n")
        file.flush()
    return file


def _rotate(path: Path, keep: int) -> None:
    """``path`` → ``path.1`` → ... → ``path.KEEP``; the oldest beyond ``keep`` goes."""
    if keep == 0:
        path.unlink(missing_ok=True)
        return
    path.with_name(f"{path.name}.{keep}").unlink(missing_ok=True)
    for index in range(keep - 1, 0, -1):
        older = path.with_name(f"{path.name}.{index}")
        if older.exists():
            older.rename(path.with_name(f"{path.name}.{index + 1}"))
    if path.exists():
        path.rename(path.with_name(f"{path.name}.1"))
