"""One series' points in a compact ring buffer: 16 bytes a point, grown only as points come.

A deque of ``(at, value)`` tuples costs about 110 bytes a point (a tuple, two float objects
and the deque's slot), which made a store at its default bound (10,000 series of 512 points)
weigh some 680 MB. Here the points are two doubles side by side in one ``array('d')`` that
grows with the points held, up to the series' capacity, then wraps: the oldest point is
overwritten by the newest.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator

# One point: its loop-clock time and its value, two doubles.
BYTES_PER_POINT = 16


class SeriesRing:
    """At most ``capacity`` points of one series, oldest first."""

    __slots__ = ("_capacity", "_data", "_head", "newest_at", "source")

    def __init__(self, capacity: int, source: str) -> None:
        self._capacity = capacity
        self._data = array("d")
        self._head = 0  # once full: where the oldest point is, and the next one goes
        self.newest_at = -math.inf
        self.source = source

    def __len__(self) -> int:
        return len(self._data) // 2

    def append(self, at: float, value: float) -> bool:
        """Add the newest point, dropping the oldest when full; False if ``at`` is older.

        Time only moves forward in a series: a point older than the newest is not taken.
        """
        if at < self.newest_at:
            return False
        self.newest_at = at
        data = self._data
        if len(data) < 2 * self._capacity:
            data.append(at)
            data.append(value)
            return True
        head = self._head
        data[2 * head] = at
        data[2 * head + 1] = value
        self._head = (head + 1) % self._capacity
        return True

    def newest(self) -> tuple[float, float] | None:
        """The newest point, or None when empty."""
        if not self._data:
            return None
        index = (self._head - 1) % len(self) if len(self) == self._capacity else len(self) - 1
        return self._data[2 * index], self._data[2 * index + 1]

    def __iter__(self) -> Iterator[tuple[float, float]]:
        """The points, oldest first."""
        data, count = self._data, len(self)
        for step in range(count):
            index = (self._head + step) % count
            yield data[2 * index], data[2 * index + 1]

    def since(self, at: float) -> list[tuple[float, float]]:
        """The points observed at or after ``at``, oldest first.

        Times never go back within a series, so the first such point is found by bisection
        and only the window is copied: a window of seconds over a ring of hundreds of points
        (every rate and quantile, every tick) costs its own length, not the ring's.
        """
        data, count, head = self._data, len(self), self._head
        low, high = 0, count
        while low < high:
            middle = (low + high) // 2
            if data[2 * ((head + middle) % count)] < at:
                low = middle + 1
            else:
                high = middle
        if low >= count:
            return []
        # The window is at most two runs of the array (before and after the wrap); each is
        # copied by slicing, in C, rather than a point at a time.
        first = head + low
        if first >= count:
            first -= count
        if first < head or head == 0:
            runs = [data[2 * first : 2 * (first + count - low)]]
        else:
            runs = [data[2 * first :], data[: 2 * head]]
        points: list[tuple[float, float]] = []
        for run in runs:
            points.extend(zip(run[0::2], run[1::2], strict=True))
        return points
