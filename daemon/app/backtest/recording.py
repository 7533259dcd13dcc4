"""Reading recordings: the JSON lines of :mod:`daemon.engine.evaluation.recorder`, back into views.

Several files may be given (a rotated ``recording.jsonl.2``, ``.1``, then ``recording.jsonl``);
their ticks are replayed in the order of the files and lines. A line that is not a complete
record (torn by a crash, or mangled) is skipped with a warning that says ``file:line``; the
rest of the file still counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from daemon.app.backtest.errors import BacktestError
from daemon.engine.evaluation.recorder import FORMAT
from daemon.policy.evaluate import TargetView


@dataclass(frozen=True, slots=True)
class RecordedTick:
    """One evaluation as recorded: when, and what each target looked like."""

    wall: datetime
    monotonic: float
    views: Mapping[str, TargetView]


@dataclass(frozen=True, slots=True)
class Recording:
    """The ticks read, in order, and a sentence per line skipped."""

    ticks: tuple[RecordedTick, ...]
    warnings: tuple[str, ...]

    def targets(self) -> list[str]:
        """Every target seen, in order of first appearance."""
        seen: dict[str, None] = {}
        for tick in self.ticks:
            seen.update(dict.fromkeys(tick.views))
        return list(seen)


def read_recording(paths: Sequence[Path]) -> Recording:
    """The ticks of ``paths``, in order.

    Raises:
        BacktestError: a file cannot be read.
    """
    ticks: list[RecordedTick] = []
    warnings: list[str] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            message = f"{path}: cannot read the recording: {exc.strerror or exc}"
            raise BacktestError(message) from exc
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                ticks.append(decode_tick(line))
            except ValueError as exc:
                warnings.append(f"{path}:{number}: skipped: {exc}")
    return Recording(tuple(ticks), tuple(warnings))


def decode_tick(line: str) -> RecordedTick:
    """One recorded tick from one line.

    Raises:
        ValueError: the line is not a whole record of a known format.
    """
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        message = f"not a whole JSON line (torn by a crash?): {exc.msg} at column {exc.colno}"
        raise ValueError(message) from exc
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        message = f"not a recording line of format {FORMAT}"
        raise ValueError(message)
    try:
        wall = datetime.fromisoformat(record["wall"])
        monotonic = float(record["monotonic"])
        targets = record["targets"]
        views = {name: _view(name, body) for name, body in targets.items()}
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        message = f"a recording line without a usable wall, monotonic or targets ({exc!r})"
        raise ValueError(message) from exc
    if wall.tzinfo is None:
        message = "the wall time has no time zone"
        raise ValueError(message)
    return RecordedTick(wall, monotonic, views)


def _view(target: str, body: Mapping[str, Any]) -> TargetView:
    signals = {name: _value(value) for name, value in body["signals"].items()}
    knobs = {name: float(value) for name, value in body["knobs"].items()}
    return TargetView(target, signals, knobs)


def _value(value: object) -> float | dict[str, float]:
    if isinstance(value, dict):
        return {str(key): float(item) for key, item in value.items()}
    if isinstance(value, bool) or not isinstance(value, int | float):
        message = f"a signal value {value!r} is not a number"
        raise TypeError(message)
    return float(value)
