from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.sources.samples import Sample, SeriesKey, labels_of
from daemon.sources.store import Freshness, SignalStore

RUNNING = SeriesKey("vllm_num_requests_running", labels_of({"instance": "main"}))


def _sample(key: SeriesKey, value: float, at: float) -> Sample:
    return Sample(key, value, at, "vllm/main")


def test_reading_is_fresh_stale_or_missing_never_zero() -> None:
    store = SignalStore()
    assert store.reading(RUNNING, now=100.0, max_age_s=10).freshness is Freshness.MISSING
    store.add([_sample(RUNNING, 7, 95.0)])
    fresh = store.reading(RUNNING, now=100.0, max_age_s=10)
    assert (fresh.freshness, fresh.value, fresh.age_s) == (Freshness.FRESH, 7, 5.0)
    stale = store.reading(RUNNING, now=106.0, max_age_s=10)
    assert (stale.freshness, stale.value, stale.age_s) == (Freshness.STALE, None, 11.0)


def test_series_are_ring_buffers_and_ignore_out_of_order_points() -> None:
    store = SignalStore(points_per_series=3)
    store.add(_sample(RUNNING, value, at) for value, at in [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0)])
    store.add([_sample(RUNNING, 99, 3.5)])
    assert store.points(RUNNING) == [(2.0, 2), (3.0, 3), (4.0, 4)]
    assert store.points(RUNNING, since=3.0) == [(3.0, 3), (4.0, 4)]
    assert store.latest(RUNNING) == (4.0, 4)


def test_new_series_beyond_the_cap_are_dropped_and_counted() -> None:
    store = SignalStore(max_series=2)
    keys = [SeriesKey("mqtt_temp", labels_of({"topic": f"t{i}"})) for i in range(5)]
    store.add(_sample(key, 1, 1.0) for key in keys)
    assert store.series_count == 2
    assert store.dropped_samples == 3
    store.add([_sample(keys[0], 2, 2.0)])  # known series still take points
    assert store.latest(keys[0]) == (2.0, 2)


def test_keys_filter_by_labels() -> None:
    store = SignalStore()
    a = SeriesKey("vllm_kv", labels_of({"instance": "a", "engine": "0"}))
    b = SeriesKey("vllm_kv", labels_of({"instance": "b"}))
    store.add([_sample(a, 1, 1), _sample(b, 1, 1)])
    assert store.keys("vllm_kv", instance="a") == [a]
    assert store.keys("vllm_kv") == [a, b]
    assert store.keys("absent") == []
    store.forget(a)
    assert store.keys("vllm_kv") == [b]


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 2 points"):
        SignalStore(points_per_series=1)


@given(
    st.lists(st.tuples(st.integers(0, 20), st.floats(0, 1000, allow_nan=False)), max_size=300),
    st.integers(2, 16),
    st.integers(1, 8),
)
def test_memory_stays_within_the_caps(
    writes: list[tuple[int, float]], points_per_series: int, max_series: int
) -> None:
    store = SignalStore(points_per_series=points_per_series, max_series=max_series)
    for series, at in writes:
        store.add([_sample(SeriesKey("s", labels_of({"n": str(series)})), 1.0, at)])
    assert store.series_count <= max_series
    assert store.point_count <= max_series * points_per_series
