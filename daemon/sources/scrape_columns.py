"""Series of one polled source sharing one time column: 8 bytes a point instead of 16.

Every sample of one poll carries the same time (the poll's), so a source's series need not
each keep that time again: the source keeps the times of its last ``capacity`` scrapes in one
:class:`ScrapeTimes`, each scrape a sequence number, and each of its series keeps only its
values, in a :class:`ColumnRing` laid out on the same sequence numbers. With a vLLM server's
244 series at a 2 s scrape, that halves what its points weigh (some 1 MiB a server when full).

A series absent from a scrape has a gap there (marked in a byte per point, allocated only for a
series that ever had one), so it reads back exactly the points it was given. What differs from
a :class:`~daemon.sources.series_ring.SeriesRing`: a series keeps its points of its source's
last ``capacity`` scrapes, not its own last ``capacity`` points, so a series that appears only
now and then keeps fewer (its newest point is always kept); and a second value for the same
scrape replaces the first instead of being a second point at the same time.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from typing import TypeVar

# One point: its value; its time is its scrape's, kept once for all the source's series.
BYTES_PER_POINT = 8

Slots = TypeVar("Slots", array, bytearray)  # type: ignore[type-arg]


class ScrapeTimes:
    """The times of a source's last ``capacity`` scrapes, by sequence number."""

    __slots__ = ("_capacity", "_times", "count")

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._times = array("d", bytes(8 * capacity))
        self.count = 0  # scrapes so far; the newest is count - 1

    def stamp(self, at: float) -> int | None:
        """The sequence number of the scrape at ``at`` (a new one unless it is the newest).

        None when ``at`` is older than the newest scrape: time only moves forward.
        """
        count = self.count
        if count:
            newest = self._times[(count - 1) % self._capacity]
            if at == newest:
                return count - 1
            if at < newest:
                return None
        self._times[count % self._capacity] = at
        self.count = count + 1
        return count

    @property
    def oldest(self) -> int:
        """The oldest sequence number whose time is still known."""
        return max(0, self.count - self._capacity)

    def at(self, seq: int) -> float:
        """The time of scrape ``seq`` (one of the last ``capacity``)."""
        return self._times[seq % self._capacity]

    def first_at_or_after(self, at: float, low: int, high: int) -> int:
        """The first sequence number in ``[low, high]`` whose time is at least ``at``.

        ``high + 1`` when there is none. Times never go back, so this is a bisection.
        """
        times, capacity = self._times, self._capacity
        high += 1
        while low < high:
            middle = (low + high) // 2
            if times[middle % capacity] < at:
                low = middle + 1
            else:
                high = middle
        return low

    def run(self, first: int, last: int) -> array[float]:
        """The times of scrapes ``first`` to ``last``, a copy in order."""
        return _run(self._times, self._capacity, first, last)


class ColumnRing:
    """One series' values at its source's scrapes, the last ``capacity`` of them."""

    __slots__ = (
        "_capacity",
        "_first",
        "_gaps",
        "_last",
        "_times",
        "_values",
        "newest_at",
        "source",
    )

    def __init__(self, times: ScrapeTimes, capacity: int, source: str) -> None:
        self._times = times
        self._capacity = capacity
        self._values = array("d", bytes(8 * capacity))
        self._gaps: bytearray | None = None  # 1 where a scrape had no value of this series
        self._first = -1  # the sequence number of its first value; -1 before any
        self._last = -1
        self.newest_at = -math.inf
        self.source = source

    def append_at(self, seq: int, at: float, value: float) -> None:
        """Set the value of scrape ``seq``, at ``at`` (the newest scrape, or the newest again)."""
        capacity, last = self._capacity, self._last
        if last < 0:
            self._first = seq
        elif seq > last + 1:
            # Scrapes without this series since its last value: gaps, not points.
            if self._gaps is None:
                self._gaps = bytearray(capacity)
            for missed in range(last + 1, min(seq, last + 1 + capacity)):
                self._gaps[missed % capacity] = 1
        slot = seq % capacity
        self._values[slot] = value
        if self._gaps is not None:
            self._gaps[slot] = 0
        self._last = seq
        self.newest_at = at

    def _span(self) -> tuple[int, int]:
        """The sequence numbers this series may hold a point at, oldest to newest."""
        last = self._last
        return max(self._first, last - self._capacity + 1, self._times.oldest), last

    def __len__(self) -> int:
        first, last = self._span()
        if last < 0 or first > last:
            return 1 if last >= 0 else 0  # only its newest point is left
        held = last - first + 1
        if self._gaps is not None:
            held -= sum(_run(self._gaps, self._capacity, first, last))
        return held

    def newest(self) -> tuple[float, float] | None:
        """The newest point, or None when empty."""
        if self._last < 0:
            return None
        return self.newest_at, self._values[self._last % self._capacity]

    def since(self, at: float) -> list[tuple[float, float]]:
        """The points observed at or after ``at``, oldest first."""
        last = self._last
        if last < 0 or self.newest_at < at:
            return []
        first, _ = self._span()
        if first > last:
            return [(self.newest_at, self._values[last % self._capacity])]
        first = self._times.first_at_or_after(at, first, last)
        times = self._times.run(first, last)
        values = _run(self._values, self._capacity, first, last)
        if self._gaps is None:
            return list(zip(times, values, strict=True))
        gaps = _run(self._gaps, self._capacity, first, last)
        return [
            (time, value) for time, value, gap in zip(times, values, gaps, strict=True) if not gap
        ]

    def since_columns(self, at: float) -> tuple[array[float], array[float]] | None:
        """:meth:`since` as two columns, the times and the values; None if it had a gap.

        Copied in C, a slice each, with no tuple a point: a view reads a window of every
        bucket of every histogram its policies read (some 1,400 with sixteen servers).
        """
        if self._gaps is not None:
            return None
        last = self._last
        if last < 0 or self.newest_at < at:
            return array("d"), array("d")
        first, _ = self._span()
        if first > last:
            return array("d", [self.newest_at]), array("d", [self._values[last % self._capacity]])
        first = self._times.first_at_or_after(at, first, last)
        return self._times.run(first, last), _run(self._values, self._capacity, first, last)


def append_scrape(
    rings: Sequence[ColumnRing], seq: int, at: float, values: Iterable[float]
) -> None:
    """Each ring's value of scrape ``seq``, at ``at``, as :meth:`ColumnRing.append_at` sets it.

    One loop for a poll's series (a vLLM page's 244) rather than a call each: a series that
    had a value at the scrape before and never missed one (the usual case) only takes its
    value; any other goes through :meth:`ColumnRing.append_at`.
    """
    for ring, value in zip(rings, values, strict=True):
        # The ring's own fields, read and set here as append_at would (this is its module).
        last = ring._last
        if last >= 0 and last == seq - 1 and ring._gaps is None:
            ring._values[seq % ring._capacity] = value
            ring._last = seq
            ring.newest_at = at
        else:
            ring.append_at(seq, at, value)


def _run(ring: Slots, capacity: int, first: int, last: int) -> Slots:
    """Slots ``first`` to ``last`` (sequence numbers, at most ``capacity`` apart) of ``ring``."""
    start, end = first % capacity, last % capacity
    if start <= end and last - first < capacity:
        return ring[start : end + 1]
    return ring[start:] + ring[: end + 1]
