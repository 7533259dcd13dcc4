"""The wall clock of a simulation: virtual second 0 is a Monday, 00:00 UTC.

Only spacing matters to most policies; schedules (business hours, weekdays) read the wall
clock, so a run starts at the top of a week to give them a whole week ahead.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(2025, 1, 6, tzinfo=UTC)


def wall(now: float) -> datetime:
    """The wall-clock time of virtual second ``now``."""
    return EPOCH + timedelta(seconds=now)
