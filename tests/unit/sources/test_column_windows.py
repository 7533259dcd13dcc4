"""A window read as columns (times, values) gives what the same points give, to the last bit.

A view reads every bucket of the histograms its policies read at every evaluation; read as
two columns of the store's rings instead of a list of points, the increase must not change:
the same number, the same None, the same implausible counter.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from daemon.sources.derivations import counter_increase, counter_increase_of_columns
from daemon.sources.domains import Implausible
from daemon.sources.scrape_columns import ColumnRing, ScrapeTimes

# A counter's next value: a rise (the usual), a reset to near zero, a fall, or no number.
_NEXT = st.one_of(
    st.tuples(st.just("rise"), st.floats(0.0, 100.0)),
    st.tuples(st.just("set"), st.sampled_from([0.0, 3.0, -1.0, 1e16, math.nan, math.inf])),
)
# Pauses, windows and ends often on a grid, so that points fall on the window's edges.
_POINTS = st.lists(
    st.tuples(st.one_of(st.sampled_from([1.0, 2.0]), st.floats(0.1, 10.0)), _NEXT),
    max_size=40,
)


def _outcome(compute: object) -> object:
    assert callable(compute)
    try:
        return ("value", compute())
    except Implausible as exc:
        return ("implausible", str(exc))


@settings(max_examples=400)
@given(
    steps=_POINTS,
    window_s=st.one_of(st.sampled_from([2.0, 4.0, 10.0, 60.0]), st.floats(1.0, 120.0)),
    now_after=st.one_of(st.sampled_from([0.0, -2.0, 1.0]), st.floats(-20.0, 20.0)),
    min_coverage=st.sampled_from([0.0, 0.5, 1.0]),
)
# A point on the window's open left edge (left out), and one on its closed right edge (kept).
@example(steps=[(1.0, ("rise", 1.0))] * 3, window_s=2.0, now_after=0.0, min_coverage=0.0)
@example(steps=[(1.0, ("rise", 1.0))] * 3, window_s=1.5, now_after=-1.0, min_coverage=0.0)
def test_an_increase_of_columns_is_the_increase_of_their_points(
    steps: list[tuple[float, tuple[str, float]]],
    window_s: float,
    now_after: float,
    min_coverage: float,
) -> None:
    times, values, at, value = [], [], 0.0, 0.0
    for pause, (how, number) in steps:
        at += pause
        value = value + number if how == "rise" else number
        times.append(at)
        values.append(value)
    now = at + now_after
    points = list(zip(times, values, strict=True))
    by_points = _outcome(lambda: counter_increase(points, window_s, now, min_coverage=min_coverage))
    by_columns = _outcome(
        lambda: counter_increase_of_columns(times, values, window_s, now, min_coverage=min_coverage)
    )
    assert repr(by_columns) == repr(by_points)  # repr: NaN equals NaN, 0.0 is not -0.0


def test_a_window_that_is_not_positive_is_refused_either_way() -> None:
    with pytest.raises(ValueError, match="window_s must be positive"):
        counter_increase([(1.0, 1.0)], 0.0, 1.0)
    with pytest.raises(ValueError, match="window_s must be positive"):
        counter_increase_of_columns([1.0], [1.0], 0.0, 1.0)


@given(
    capacity=st.integers(1, 12),
    scrapes=st.lists(st.tuples(st.floats(0.0, 5.0), st.booleans()), max_size=40),
    since=st.floats(-1.0, 150.0),
)
def test_a_rings_columns_are_its_points_or_none_once_it_missed_a_scrape(
    capacity: int, scrapes: list[tuple[float, bool]], since: float
) -> None:
    times = ScrapeTimes(capacity)
    ring = ColumnRing(times, capacity, "vllm/main")
    at, missed = 0.0, False
    for value, (pause, present) in enumerate(scrapes):
        at += pause
        seq = times.stamp(at)
        assert seq is not None
        if present:
            ring.append_at(seq, at, float(value))
        missed = missed or (not present and ring.newest() is not None)
    columns = ring.since_columns(since)
    if columns is None:
        assert missed
        return
    assert list(zip(*columns, strict=True)) == ring.since(since)
