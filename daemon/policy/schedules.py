"""Cron windows: the times in which a policy may act (a maintenance window, business hours).

A window opens at each time its cron expression fires and stays open for its duration. Cron
expressions are APScheduler's ``CronTrigger.from_crontab`` (five fields, minute first; use day
names such as ``sat``, since APScheduler counts weekday 0 as Monday, unlike classic cron). The
check is pure: it takes the wall-clock time from the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger


@dataclass(frozen=True, slots=True)
class CronWindow:
    """A recurring window: opens when ``cron`` fires, lasts ``duration_s``."""

    cron: str
    duration_s: float
    trigger: CronTrigger

    def contains(self, wall: datetime) -> bool:
        """Whether ``wall`` (timezone-aware) falls inside an opening of this window."""
        opened = self.trigger.get_next_fire_time(None, wall - timedelta(seconds=self.duration_s))
        return opened is not None and opened <= wall


def cron_window(cron: str, duration_s: float, timezone: str = "UTC") -> CronWindow:
    """Parse a window.

    Raises:
        ValueError: the cron expression or time zone is not valid (the message says which).
    """
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        message = f"unknown time zone {timezone!r}"
        raise ValueError(message) from exc
    try:
        trigger = CronTrigger.from_crontab(cron, timezone=zone)
    except ValueError as exc:
        message = f"cron expression {cron!r}: {exc}"
        raise ValueError(message) from exc
    if duration_s <= 0:
        message = "a window needs a positive duration"
        raise ValueError(message)
    return CronWindow(cron, duration_s, trigger)


@dataclass(frozen=True, slots=True)
class CronTimes:
    """Moments at which a scheduled change is due (a predictable peak's ramp-up, say)."""

    cron: str
    trigger: CronTrigger

    def latest(self, wall: datetime, grace_s: float) -> datetime | None:
        """The last firing at or before ``wall``, if it is at most ``grace_s`` old."""
        fire = self.trigger.get_next_fire_time(None, wall - timedelta(seconds=grace_s))
        latest = None
        while fire is not None and fire <= wall:
            latest = fire
            fire = self.trigger.get_next_fire_time(fire, fire + timedelta(seconds=1))
        return latest


def cron_times(cron: str, timezone: str = "UTC") -> CronTimes:
    """Parse the moments of a scheduled change.

    Raises:
        ValueError: the cron expression or time zone is not valid.
    """
    return CronTimes(cron, cron_window(cron, 1.0, timezone).trigger)
