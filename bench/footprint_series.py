"""What a series of resident-memory samples says: the figures at set times, the peak, the trend.

A daemon that leaks shows it as a slope, not as a peak: a 30-minute run is read at 60 s, 120 s,
then every five minutes, and the least-squares slope over its second half (after warm-up) says
whether memory is flat or still growing. The governor's signal store grows by design until its
rings are full (points_per_series scrapes: 512 x 2 s, some 17 minutes), so the slope over the
last quarter is given too: growth past that point is a leak.
"""

from __future__ import annotations

from dataclasses import dataclass

# A slope under this (MiB per hour, over the second half) is noise, not growth: allocator
# fragments and the odd lazily built cache move RSS by a few hundred KiB.
FLAT_MIB_PER_HOUR = 2.0


@dataclass(frozen=True)
class RssSummary:
    """Resident memory of one process over a run."""

    marks: tuple[tuple[float, float], ...]  # (seconds since start, MiB) at the marks
    last_mib: float
    peak_mib: float
    slope_mib_per_hour: float  # over the second half of the run
    last_quarter_mib_per_hour: float  # over its last quarter: after the store's rings filled

    @property
    def trend(self) -> str:
        """ "flat" or "growing" (or "shrinking"), from the second half's slope."""
        if abs(self.slope_mib_per_hour) <= FLAT_MIB_PER_HOUR:
            return "flat"
        return "growing" if self.slope_mib_per_hour > 0 else "shrinking"


def mark_times(seconds: float) -> list[float]:
    """60 s, 120 s, then every 300 s, up to ``seconds``."""
    marks = [mark for mark in (60.0, 120.0) if mark <= seconds]
    mark = 300.0
    while mark <= seconds:
        marks.append(mark)
        mark += 300.0
    return marks


def summarise(samples: list[tuple[float, float]]) -> RssSummary:
    """Summarise ``(seconds since start, MiB)`` samples, in time order (at least one)."""
    end = samples[-1][0]
    marks = tuple((mark, _at(samples, mark)) for mark in mark_times(end))
    second_half = [(t, mib) for t, mib in samples if t >= end / 2]
    last_quarter = [(t, mib) for t, mib in samples if t >= 3 * end / 4]
    return RssSummary(
        marks=marks,
        last_mib=samples[-1][1],
        peak_mib=max(mib for _, mib in samples),
        slope_mib_per_hour=3600 * _slope(second_half),
        last_quarter_mib_per_hour=3600 * _slope(last_quarter),
    )


def _at(samples: list[tuple[float, float]], mark: float) -> float:
    """The first sample at or after ``mark``."""
    return next(mib for t, mib in samples if t >= mark)


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``points`` (0 with fewer than two distinct times)."""
    if len(points) < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return 0.0
    return sum((t - mean_t) * (y - mean_y) for t, y in points) / spread
