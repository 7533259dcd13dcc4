"""A series' ring: the window since a moment is what a scan would find, whatever the wrap."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from daemon.sources.series_ring import SeriesRing

_STEPS = st.lists(st.floats(min_value=0.0, max_value=5.0, allow_nan=False), max_size=60)


@given(
    capacity=st.integers(min_value=1, max_value=16),
    steps=_STEPS,
    since=st.floats(min_value=-1.0, max_value=200.0, allow_nan=False),
)
def test_since_is_the_points_at_or_after_the_moment(
    capacity: int, steps: list[float], since: float
) -> None:
    ring = SeriesRing(capacity, "source")
    at = 0.0
    for value, step in enumerate(steps):
        at += step  # equal times too: a series never goes back, it may stand still
        ring.append(at, float(value))
    assert ring.since(since) == [point for point in ring if point[0] >= since]
