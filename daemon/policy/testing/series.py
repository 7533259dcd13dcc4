"""Signal series in promtool's expanding notation, one value per evaluation interval from t=0.

A series is space-separated segments, concatenated:

* ``a`` is one value (``1``, ``-0.5``, ``2e-3``, ``Inf``, ``NaN``);
* ``_`` (or ``stale``) is one tick without data: the signal is absent, as if stale;
* ``a+bxN`` is a, a+b, a+2b, ..., a+Nb: N+1 values (``a-bxN`` counts down);
* ``axN`` is a repeated N+1 times (``a+0xN``);
* ``_xN`` is N ticks without data: N, not N+1, as in promtool (a gap cannot increment).

``"0x2 1+1x2 _x2 5"`` is ``0 0 0 1 2 3 _ _ 5``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

Value = float | None  # None: no data at that tick
MAX_VALUES = 100_000  # about 11 days at a 10 s interval; more is a typo, not a test

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:[Ii]nf|NaN|nan)"
_UNSIGNED = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_SINGLE = re.compile(rf"(?:{_NUMBER})", re.ASCII)
_EXPANSION = re.compile(
    rf"(?P<a>{_NUMBER})(?:(?P<op>[+-])(?P<b>{_UNSIGNED}))?x(?P<n>\d+)", re.ASCII
)
_GAPS = re.compile(r"(?:_|stale)x(?P<n>\d+)", re.ASCII)
_GAP = frozenset({"_", "stale"})
_COUNT_DIGITS = 7  # more digits than this is above MAX_VALUES anyway
_FORMS = "write e.g. 0.5, 2x30 (31 values), 1+0.5x10, 5-1x4, _ or _x3"


class SeriesError(ValueError):
    """A series is not in the expanding notation; ``column`` is 1-based within the text."""

    def __init__(self, message: str, column: int = 1) -> None:
        super().__init__(message)
        self.column = column


def parse_series(text: str) -> list[Value]:
    """The values of ``text``, one per tick; None where there is no data.

    Raises:
        SeriesError: a segment is not a value or an expansion, or the series is too long.
    """
    values: list[Value] = []
    for match in re.finditer(r"\S+", text):
        segment, column = match.group(0), match.start() + 1
        values.extend(_segment(segment, column, room=MAX_VALUES - len(values)))
    return values


def _segment(segment: str, column: int, room: int) -> list[Value]:
    if segment in _GAP:
        values: list[Value] = [None]
    elif gaps := _GAPS.fullmatch(segment):
        values = [None] * _count(gaps.group("n"), segment, column, room, extra=0)
    elif _SINGLE.fullmatch(segment):
        values = [float(segment)]
    elif expansion := _EXPANSION.fullmatch(segment):
        start = float(expansion.group("a"))
        step = float(expansion.group("b") or 0.0)
        if expansion.group("op") == "-":
            step = -step
        count = _count(expansion.group("n"), segment, column, room, extra=1)
        values = [start + index * step if step else start for index in range(count)]
    else:
        message = f"{segment!r} (column {column}) is not a value or an expansion: {_FORMS}"
        raise SeriesError(message, column)
    if len(values) > room:
        raise _too_long(column)
    return values


def _count(digits: str, segment: str, column: int, room: int, extra: int) -> int:
    if len(digits) > _COUNT_DIGITS or int(digits) + extra > room:
        raise _too_long(column)
    count = int(digits) + extra
    if count == 0:
        message = f"{segment!r} (column {column}) gives no value at all"
        raise SeriesError(message, column)
    return count


def _too_long(column: int) -> SeriesError:
    message = f"the series passes {MAX_VALUES} values at column {column}"
    return SeriesError(message, column)


def format_series(values: Sequence[Value]) -> str:
    """``values`` in the notation, runs of one value written ``axN``; parses back the same."""
    segments: list[str] = []
    index = 0
    while index < len(values):
        value = values[index]
        run = 1
        while index + run < len(values) and _same(values[index + run], value):
            run += 1
        if value is None:
            segments.append("_" if run == 1 else f"_x{run}")
        else:
            text = repr(value)
            segments.append(text if run == 1 else f"{text}x{run - 1}")
        index += run
    return " ".join(segments)


def _same(left: Value, right: Value) -> bool:
    # By spelling, so that 0.0 and -0.0 stay apart and NaN equals NaN.
    return repr(left) == repr(right)
