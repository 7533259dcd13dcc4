"""Times of a test, written as people write them: ``0s``, ``2m10s``, ``1h``."""

from __future__ import annotations

_UNITS = (("d", 86400.0), ("h", 3600.0), ("m", 60.0))


def format_seconds(seconds: float) -> str:
    """``130`` as ``2m10s``; the inverse of :func:`daemon.policy.durations.parse_duration`."""
    if seconds <= 0:
        return "0s"
    parts = []
    rest = seconds
    for unit, size in _UNITS:
        whole = int(rest // size)
        if whole:
            parts.append(f"{whole}{unit}")
            rest -= whole * size
    rest = round(rest, 3)
    if rest or not parts:
        parts.append(f"{rest:g}s")
    return "".join(parts)
