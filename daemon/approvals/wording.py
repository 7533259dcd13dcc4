"""How values, durations, thresholds and times are written in approval messages.

Kept apart from the Block Kit layout so that the proposal's texts (expected effect, cost) and
the message agree on how a number looks.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from daemon.core.knobs import KNOBS, LOG_LEVELS

ELLIPSIS = "…"

_LEVEL_NAMES = {value: name for name, value in LOG_LEVELS.items()}
_NUMBER = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_OPERATOR = r">=|<=|==|!=|>|<"
# A comparison's operator seen from the other side: `0.5 < x` is `x > 0.5`.
_FLIPPED = {">": "<", "<": ">", ">=": "<=", "<=": ">=", "==": "==", "!=": "!="}


def format_value(knob: str, value: float) -> str:
    """A knob's value as people write it: integers without ``.0``, log levels by name."""
    spec = KNOBS.get(knob)
    if spec is not None and spec.kind is bool:
        return "on" if value else "off"
    if knob.endswith("log_level") and value in _LEVEL_NAMES:
        return f"{_LEVEL_NAMES[int(value)]} ({int(value)})"
    if (spec is not None and spec.kind is int) or (math.isfinite(value) and value == int(value)):
        return str(round(value))
    return f"{value:.4g}"


def format_signal(value: object) -> str:
    """A signal's value read as evidence; None means the signal had no fresh data."""
    if value is None:
        return "no data"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"{value:.4g}"
    return str(value)


def format_duration(seconds: float) -> str:
    """``45 s``, ``2 min 10 s``, ``1 h 5 min``: short, and exact enough for people."""
    if not math.isfinite(seconds):
        return f"{seconds} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def thresholds(condition: str, signal: str) -> tuple[str, ...]:
    """The comparisons of ``signal`` against a literal in ``condition``, as ``> 0.5``.

    A policy's condition is CEL; only the plain ``signal OP number`` (or ``number OP signal``)
    shapes are picked out, which is what a person needs next to the value that was read.
    """
    name = re.escape(signal)
    found: list[str] = []
    forward = rf"(?<![\w.]){name}\s*({_OPERATOR})\s*({_NUMBER})"
    for match in re.finditer(forward, condition):
        found.append(f"{match.group(1)} {match.group(2)}")
    backward = rf"({_NUMBER})\s*({_OPERATOR})\s*{name}(?![\w.])"
    for match in re.finditer(backward, condition):
        found.append(f"{_FLIPPED[match.group(2)]} {match.group(1)}")
    return tuple(found)


def utc_text(at: datetime) -> str:
    """A time in UTC as ``2026-05-04 14:30 UTC``, for plain text and fallbacks."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def slack_date(at: datetime) -> str:
    """A time that Slack shows in each reader's own time zone, with a UTC fallback."""
    return f"<!date^{int(at.timestamp())}^{{date_short_pretty}} {{time}}|{utc_text(at)}>"


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, marked with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    return text[: limit - len(ELLIPSIS)] + ELLIPSIS
