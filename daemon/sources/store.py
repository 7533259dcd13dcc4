"""The signal store: bounded ring buffers of samples, one per series, with a memory budget.

Bounds, each a guard against a source that produces too much (a chatty MQTT topic tree, an
exporter that puts request ids into labels):

* every series keeps at most ``points_per_series`` points (oldest dropped first), 16 bytes
  each (:mod:`daemon.sources.series_ring`), and its key is at most :data:`MAX_KEY_CHARS`
  characters in at most :data:`MAX_KEY_LABELS` labels. A polled source's series, added a
  scrape at a time (:meth:`SignalStore.add_scrape`), share one time column and keep 8 bytes a
  point, of their source's last ``points_per_series`` scrapes
  (:mod:`daemon.sources.scrape_columns`);
* every source (a vLLM target, MQTT, Prometheus, NVML, the host) holds at most
  ``max_series_per_source`` series: a sample of a further new series of that source is dropped
  and counted, so one source cannot take the room of the others;
* the store holds at most ``max_series`` series. When it is full, a new series of a source that
  holds fewer series than the largest one still gets in: the largest source's least recently
  updated series makes room for it. So a source can only ever lose series to one that holds
  more, never starve a smaller one, whatever the order in which they came;
* a series that stopped appearing while its source kept answering (none of its points in the
  last ``forget_after_s`` of that source's samples) is forgotten. A source that fails adds
  nothing, so its series stay, and read as stale, not as never seen.

Memory is therefore bounded by :func:`memory_budget_bytes` of the bounds, which the daemon logs
at start and a test measures. Reads say how old the data is; deciding what is stale is the
reader's business, with :meth:`SignalStore.reading` as the usual way to ask.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import cast

from daemon.sources.samples import Sample, SampleColumns, SeriesKey
from daemon.sources.scrape_columns import ColumnRing, ScrapeTimes, append_scrape
from daemon.sources.series_ring import BYTES_PER_POINT, SeriesRing

log = logging.getLogger(__name__)

# A series' key (its name and labels) is at most this many characters, or the series is not
# stored (dropped and counted): vLLM keys are about 150, and the budget below counts on it.
MAX_KEY_CHARS = 768
MAX_KEY_LABELS = 24
# What a series costs besides its points, at the largest key allowed: the key with its label
# tuples and strings, the ring and its array's header, and its entries in the store's indexes.
# Measured with tracemalloc (about 5 KiB, with the array's spare room) and pinned by a test.
SERIES_OVERHEAD_BYTES = 6_144

Point = tuple[float, float]
Ring = SeriesRing | ColumnRing


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


def memory_budget_bytes(max_series: int, points_per_series: int) -> int:
    """The most memory a store with these bounds holds, every series full."""
    return max_series * (SERIES_OVERHEAD_BYTES + points_per_series * BYTES_PER_POINT)


class SignalStore:
    """Ring buffers of samples per series, bounded in points, in series and per source."""

    def __init__(
        self,
        *,
        points_per_series: int = 512,
        max_series: int = 10_000,
        max_series_per_source: int | None = None,
        forget_after_s: float = math.inf,
    ) -> None:
        if points_per_series < 2 or max_series < 1:
            message = "a store needs at least 2 points per series and 1 series"
            raise ValueError(message)
        self._points_per_series = points_per_series
        self._max_series = max_series
        self._per_source = min(max_series_per_source or max_series, max_series)
        self._forget_after_s = forget_after_s
        self._series: dict[SeriesKey, Ring] = {}
        # A polled source's scrape times, shared by its series (add_scrape).
        self._scrapes: dict[str, ScrapeTimes] = {}
        # A polled source's last columns' keys and their series (add_scrape), while all held.
        self._known_columns: dict[str, tuple[tuple[SeriesKey, ...], list[ColumnRing]]] = {}
        self._by_name: dict[str, set[SeriesKey]] = {}
        # Each name's keys in keys()'s order, sorted at the first ask after one came or went:
        # a view asks for every histogram's buckets (thousands of keys with sixteen servers)
        # at every evaluation, and they change only when a series does.
        self._sorted_keys: dict[str, list[SeriesKey]] = {}
        # Each source's series, least recently updated first.
        self._by_source: dict[str, OrderedDict[SeriesKey, None]] = {}
        self._quota_reached: set[str] = set()
        self.dropped_samples = 0
        self.evicted_series = 0

    @property
    def memory_budget_bytes(self) -> int:
        """The most memory this store holds, at its bounds."""
        return memory_budget_bytes(self._max_series, self._points_per_series)

    def add(self, samples: Iterable[Sample]) -> None:
        """Append samples; a sample older than its series' newest point is ignored."""
        series, by_source = self._series, self._by_source
        newest: dict[str, float] = {}
        for sample in samples:
            key, at = sample.key, sample.at
            ring = series.get(key)
            if ring is None:
                ring = self._admit(key, sample.source)
                if ring is None:
                    self.dropped_samples += 1
                    continue
            if isinstance(ring, ColumnRing):
                seq = self._scrapes[ring.source].stamp(at)
                if seq is None:
                    continue  # out of order
                ring.append_at(seq, at, sample.value)
            elif not ring.append(at, sample.value):
                continue  # out of order
            source = ring.source
            by_source[source].move_to_end(key)
            if at > newest.get(source, -math.inf):
                newest[source] = at
        for source, at in newest.items():
            self._forget_older(source, at - self._forget_after_s)

    def add_scrape(self, samples: Iterable[Sample], columns: SampleColumns | None = None) -> None:
        """Append the samples of one poll of a polled source, all stamped with the poll's time.

        As :meth:`add`, but the series of a source first seen here share its scrape times
        (:mod:`daemon.sources.scrape_columns`): half the memory a point. Samples of several
        times are taken too, each time a scrape of its own. ``columns`` are more samples of
        the poll, taken first: columns on the same keys as the source's last ones (a page read
        by its plan gives the same tuple) go straight to the series found then.
        """
        newest: dict[str, float] = {}
        if columns is not None:
            self._add_columns(columns, newest)
        self._add_scraped(samples, newest)
        for source, at in newest.items():
            self._forget_older(source, at - self._forget_after_s)

    def _add_columns(self, columns: SampleColumns, newest: dict[str, float]) -> None:
        """Append ``columns`` as :meth:`_add_scraped` appends their samples, with the same result.

        The series of the source's last columns are kept (until one of its series is forgotten)
        when they are all of that source's scrape times: for the same keys again, a scrape
        costs an append and a move in the source's order per value, no lookup and no sample.
        """
        source, keys, at = columns.source, columns.keys, columns.at
        known = self._known_columns.get(source)
        if known is None or known[0] is not keys:
            self._add_scraped(columns.samples(), newest)
            rings = [self._series.get(key) for key in keys]
            if all(isinstance(ring, ColumnRing) and ring.source == source for ring in rings):
                self._known_columns[source] = keys, cast("list[ColumnRing]", rings)
            return
        seq = self._scrapes[source].stamp(at)
        if seq is None:
            return  # out of order
        if at > newest.get(source, -math.inf):
            newest[source] = at
        append_scrape(known[1], seq, at, columns.values)
        to_end = self._by_source[source].move_to_end
        for key in keys:
            to_end(key)

    def _add_scraped(self, samples: Iterable[Sample], newest: dict[str, float]) -> None:
        """:meth:`add_scrape`'s appends, noting each source's newest time in ``newest``."""
        series, by_source = self._series, self._by_source
        # The scrape stamped last: its source, its time, its sequence number (None: refused).
        # A poll's samples are all of one, so it is stamped once, not once a sample.
        stamped_source, stamped_at, seq = "", -math.inf, None
        for sample in samples:
            key, at = sample.key, sample.at
            ring = series.get(key)
            if ring is None:
                ring = self._admit(key, sample.source, scrape=True)
                if ring is None:
                    self.dropped_samples += 1
                    continue
            source = ring.source
            if isinstance(ring, SeriesRing):
                if not ring.append(at, sample.value):
                    continue  # out of order
                if at > newest.get(source, -math.inf):
                    newest[source] = at
            else:
                if source != stamped_source or at != stamped_at:
                    stamped_source, stamped_at = source, at
                    seq = self._scrapes[source].stamp(at)
                    if seq is not None and at > newest.get(source, -math.inf):
                        newest[source] = at
                if seq is None:
                    continue  # out of order
                ring.append_at(seq, at, sample.value)
            by_source[source].move_to_end(key)

    def _admit(self, key: SeriesKey, source: str, *, scrape: bool = False) -> Ring | None:
        """A new ring for ``key`` if its source may hold one more series, else None.

        With ``scrape``, a ring on its source's scrape times (made at its first series).
        """
        if len(key.labels) > MAX_KEY_LABELS or _key_chars(key) > MAX_KEY_CHARS:
            return None
        mine = self._by_source.setdefault(source, OrderedDict())
        if len(mine) >= self._per_source:
            self._note_quota(source, "its quota, max_series_per_source", self._per_source)
            return None
        if len(self._series) >= self._max_series:
            largest = max(self._by_source.values(), key=len)
            if len(largest) <= len(mine) + 1:
                self._note_quota(source, "the store's bound, max_series", self._max_series)
                return None
            self._evict(next(iter(largest)))
        ring: Ring
        if scrape:
            times = self._scrapes.get(source)
            if times is None:
                times = self._scrapes[source] = ScrapeTimes(self._points_per_series)
            ring = ColumnRing(times, self._points_per_series, source)
        else:
            ring = SeriesRing(self._points_per_series, source)
        self._series[key] = ring
        self._by_name.setdefault(key.name, set()).add(key)
        self._sorted_keys.pop(key.name, None)
        mine[key] = None
        return ring

    def _note_quota(self, source: str, bound: str, size: int) -> None:
        if source not in self._quota_reached:
            self._quota_reached.add(source)
            log.warning(
                "a source reached a series bound: samples of its further new series are dropped",
                extra={"source": source, "bound": bound, "series": size},
            )

    def _forget_older(self, source: str, before: float) -> None:
        """Forget ``source``'s series whose newest point is older than ``before``."""
        series = self._by_source.get(source)
        while series:
            key = next(iter(series))
            if self._series[key].newest_at >= before:
                return
            self._evict(key)

    def _evict(self, key: SeriesKey) -> None:
        self.evicted_series += 1
        self.forget(key)

    def names(self) -> list[str]:
        """Names of every series held."""
        return [name for name, keys in self._by_name.items() if keys]

    def keys(self, name: str, **labels: str) -> list[SeriesKey]:
        """Series named ``name`` whose labels include ``labels``, in a stable order."""
        ordered = self._sorted_keys.get(name)
        if ordered is None:
            ordered = sorted(self._by_name.get(name, ()), key=lambda key: key.labels)
            self._sorted_keys[name] = ordered
        if not labels:
            return list(ordered)
        wanted = set(labels.items())
        return [key for key in ordered if wanted <= set(key.labels)]

    def points(self, key: SeriesKey, since: float = float("-inf")) -> list[Point]:
        """Points of ``key`` observed at or after ``since``, oldest first."""
        ring = self._series.get(key)
        return [] if ring is None else ring.since(since)

    def point_columns(
        self, key: SeriesKey, since: float = float("-inf")
    ) -> tuple[Sequence[float], Sequence[float]] | None:
        """:meth:`points` as two columns, the times and the values, where a series keeps them so.

        None where it does not (a series added one sample at a time, or one that missed a
        scrape of its source): :meth:`points` then.
        """
        ring = self._series.get(key)
        if ring is None:
            return (), ()
        return ring.since_columns(since) if isinstance(ring, ColumnRing) else None

    def source_of(self, key: SeriesKey) -> str | None:
        """The source that first reported ``key``."""
        ring = self._series.get(key)
        return ring.source if ring is not None else None

    def latest(self, key: SeriesKey) -> Point | None:
        """The newest point of ``key``, or None."""
        ring = self._series.get(key)
        return ring.newest() if ring is not None else None

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
        ring = self._series.pop(key, None)
        if ring is not None:
            self._known_columns.pop(ring.source, None)
            self._sorted_keys.pop(key.name, None)
            self._by_name[key.name].discard(key)
            if not self._by_name[key.name]:
                del self._by_name[key.name]
            self._by_source[ring.source].pop(key, None)

    def forget_source(self, source: str) -> None:
        """Drop every series of ``source`` (it left the configuration)."""
        for key in list(self._by_source.get(source, ())):
            self.forget(key)
        self._by_source.pop(source, None)
        self._scrapes.pop(source, None)
        self._known_columns.pop(source, None)

    def series_of(self, source: str) -> int:
        """Number of series ``source`` holds."""
        return len(self._by_source.get(source, ()))

    @property
    def series_count(self) -> int:
        """Number of series held."""
        return len(self._series)

    @property
    def point_count(self) -> int:
        """Number of points held across all series."""
        return sum(len(points) for points in self._series.values())


def _key_chars(key: SeriesKey) -> int:
    return len(key.name) + sum(len(label) + len(value) for label, value in key.labels)
