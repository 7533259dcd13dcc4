"""The signal store: bounded ring buffers of samples, one per series, with a memory cap.

Every series keeps at most ``points_per_series`` points (oldest dropped first) and the store
keeps at most ``max_series`` series: a sample of a new series beyond the cap is dropped and
counted, never allowed to grow memory without bound (a chatty MQTT topic tree must not take the
governor down). Reads say how old the data is; deciding what is stale is the reader's business,
with :meth:`SignalStore.reading` as the usual way to ask.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from daemon.sources.samples import Sample, SeriesKey

Point = tuple[float, float]


class Freshness(Enum):
    """How much a reading can be trusted."""

    FRESH = "fresh"
    STALE = "stale"
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class Reading:
    """The latest value of one series as seen at ``now``; ``value`` is None unless fresh."""

    key: SeriesKey
    freshness: Freshness
    value: float | None
    age_s: float | None


class SignalStore:
    """Ring buffers of samples per series, bounded in points and in series."""

    def __init__(self, *, points_per_series: int = 512, max_series: int = 10_000) -> None:
        if points_per_series < 2 or max_series < 1:
            message = "a store needs at least 2 points per series and 1 series"
            raise ValueError(message)
        self._points_per_series = points_per_series
        self._max_series = max_series
        self._series: dict[SeriesKey, deque[Point]] = {}
        self._by_name: dict[str, set[SeriesKey]] = {}
        self._source_of: dict[SeriesKey, str] = {}
        self.dropped_samples = 0

    def add(self, samples: Iterable[Sample]) -> None:
        """Append samples; a sample older than its series' newest point is ignored."""
        for sample in samples:
            points = self._series.get(sample.key)
            if points is None:
                if len(self._series) >= self._max_series:
                    self.dropped_samples += 1
                    continue
                points = deque(maxlen=self._points_per_series)
                self._series[sample.key] = points
                self._by_name.setdefault(sample.key.name, set()).add(sample.key)
                self._source_of[sample.key] = sample.source
            if points and sample.at < points[-1][0]:
                continue  # out of order: time only moves forward in a series
            points.append((sample.at, sample.value))

    def names(self) -> list[str]:
        """Names of every series held."""
        return [name for name, keys in self._by_name.items() if keys]

    def keys(self, name: str, **labels: str) -> list[SeriesKey]:
        """Series named ``name`` whose labels include ``labels``, in a stable order."""
        wanted = set(labels.items())
        found = [key for key in self._by_name.get(name, ()) if wanted <= set(key.labels)]
        return sorted(found, key=lambda key: key.labels)

    def points(self, key: SeriesKey, since: float = float("-inf")) -> list[Point]:
        """Points of ``key`` observed at or after ``since``, oldest first."""
        return [point for point in self._series.get(key, ()) if point[0] >= since]

    def source_of(self, key: SeriesKey) -> str | None:
        """The source that first reported ``key``."""
        return self._source_of.get(key)

    def latest(self, key: SeriesKey) -> Point | None:
        """The newest point of ``key``, or None."""
        points = self._series.get(key)
        return points[-1] if points else None

    def reading(self, key: SeriesKey, now: float, max_age_s: float) -> Reading:
        """The newest value of ``key`` if it is at most ``max_age_s`` old; else why not."""
        newest = self.latest(key)
        if newest is None:
            return Reading(key, Freshness.MISSING, None, None)
        age = now - newest[0]
        if age > max_age_s:
            return Reading(key, Freshness.STALE, None, age)
        return Reading(key, Freshness.FRESH, newest[1], age)

    def forget(self, key: SeriesKey) -> None:
        """Drop a series, e.g. one a restarted server no longer exposes."""
        if self._series.pop(key, None) is not None:
            self._by_name[key.name].discard(key)
            self._source_of.pop(key, None)

    @property
    def series_count(self) -> int:
        """Number of series held."""
        return len(self._series)

    @property
    def point_count(self) -> int:
        """Number of points held across all series."""
        return sum(len(points) for points in self._series.values())
