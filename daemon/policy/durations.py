"""Durations as people write them in policies: ``90s``, ``2m``, ``1h30m``, ``1d``, or seconds."""

from __future__ import annotations

import math
import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str | int | float) -> float:
    """Seconds in ``text``; a bare number is seconds.

    Raises:
        ValueError: not a duration (the message shows the accepted forms).
    """
    if isinstance(text, bool):
        message = "a duration, not a boolean"
        raise ValueError(message)  # noqa: TRY004 - pydantic reports ValueErrors as input errors
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        compact = text.strip().replace(" ", "")
        parts = _PART.findall(compact)
        if not parts or "".join(number + unit for number, unit in parts) != compact:
            message = f"{text!r} is not a duration: write e.g. 30s, 2m, 1h30m or 1d"
            raise ValueError(message)
        seconds = sum(float(number) * _UNIT_S[unit] for number, unit in parts)
    if not math.isfinite(seconds) or seconds < 0:
        message = f"{text!r} is not a usable duration"
        raise ValueError(message)
    return seconds
