from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.sources.samples import Sample, SeriesKey, labels_of
from daemon.sources.series_ring import BYTES_PER_POINT
from daemon.sources.store import (
    MAX_KEY_CHARS,
    MAX_KEY_LABELS,
    Freshness,
    SignalStore,
    memory_budget_bytes,
)

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


# Issue 15, finding 2: the store's global cap filled with one target's series and never let
# go, so the healthy target's signals were never stored; and at its default bound (10,000
# series of 512 points, as deques of tuples) it weighed about 680 MB.


def _series(source: str, count: int, at: float, start: int = 0) -> list[Sample]:
    name = source.replace("/", "_")
    return [
        Sample(SeriesKey(name, labels_of({"n": str(n)})), 1.0, at, source)
        for n in range(start, start + count)
    ]


def test_no_source_holds_more_than_its_quota() -> None:
    store = SignalStore(max_series=100, max_series_per_source=10)
    store.add(_series("vllm/hostile", 50, 1.0))
    store.add(_series("vllm/healthy", 5, 1.0))
    assert (store.series_of("vllm/hostile"), store.series_of("vllm/healthy")) == (10, 5)
    assert store.dropped_samples == 40


def test_a_full_store_makes_room_for_a_smaller_source_at_the_largest_ones_expense() -> None:
    store = SignalStore(max_series=20, max_series_per_source=20)
    store.add(_series("vllm/hostile", 20, 1.0))
    store.add(_series("vllm/hostile", 10, 2.0))  # the first ten are now the most recent
    store.add(_series("vllm/healthy", 6, 3.0))
    assert (store.series_of("vllm/hostile"), store.series_of("vllm/healthy")) == (14, 6)
    assert store.evicted_series == 6
    hostile = {key.label("n") for key in store.keys("vllm_hostile")}
    assert {str(n) for n in range(10)} <= hostile, "the least recently updated went first"
    # The hostile source cannot take them back: it already holds more than the healthy one.
    store.add(_series("vllm/hostile", 20, 4.0, start=100))
    assert store.series_of("vllm/healthy") == 6


def test_two_sources_never_take_series_from_each_other_back_and_forth() -> None:
    store = SignalStore(max_series=10, max_series_per_source=10)
    store.add(_series("a", 5, 1.0))
    store.add(_series("b", 5, 1.0))
    store.add(_series("a", 1, 2.0, start=50))
    store.add(_series("b", 1, 2.0, start=50))
    assert (store.series_of("a"), store.series_of("b")) == (5, 5)
    assert store.evicted_series == 0


def test_series_that_stopped_appearing_are_forgotten_while_their_source_answers() -> None:
    store = SignalStore(forget_after_s=60.0)
    store.add(_series("vllm/t", 3, 0.0))
    store.add(_series("vllm/t", 1, 59.0))
    assert store.series_of("vllm/t") == 3
    store.add(_series("vllm/t", 1, 61.0))
    assert [key.label("n") for key in store.keys("vllm_t")] == ["0"]
    assert store.evicted_series == 2


def test_a_source_that_adds_nothing_keeps_its_series() -> None:
    store = SignalStore(forget_after_s=60.0)
    store.add(_series("vllm/down", 3, 0.0))
    store.add(_series("nvml", 1, 500.0))
    assert store.series_of("vllm/down") == 3
    reading = store.reading(_series("vllm/down", 1, 0.0)[0].key, now=500.0, max_age_s=10)
    assert reading.freshness is Freshness.STALE


def test_a_key_too_large_for_an_identity_is_not_stored() -> None:
    store = SignalStore()
    huge = SeriesKey("mqtt_x", labels_of({"topic": "t" * (MAX_KEY_CHARS + 1)}))
    many = SeriesKey("mqtt_x", tuple((f"l{n:02d}", "v") for n in range(MAX_KEY_LABELS + 1)))
    store.add([_sample(huge, 1, 1.0), _sample(many, 1, 1.0)])
    assert store.series_count == 0
    assert store.dropped_samples == 2


def test_a_store_at_its_bounds_stays_within_its_memory_budget() -> None:
    """Every series full, with keys of the largest size allowed, measured by tracemalloc."""
    max_series, points = 300, 32
    per_label = (MAX_KEY_CHARS - 40) // MAX_KEY_LABELS - 3
    name = "vllm_request_time_to_first_token_s_bucket"

    def key(n: int) -> SeriesKey:
        value = (f"{n:08d}" + "x" * per_label)[:per_label]
        return SeriesKey(name, tuple((f"l{i:02d}", value) for i in range(MAX_KEY_LABELS)))

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store = SignalStore(points_per_series=points, max_series=max_series)
        keys = [key(n) for n in range(max_series)]
        for at in range(points + 3):
            store.add(Sample(k, float(at), float(at), "vllm/main") for k in keys)
            # As many again, beyond the bound: dropped, and nothing of them kept.
            extra = (key(n) for n in range(max_series, 2 * max_series))
            store.add(Sample(k, float(at), float(at), "vllm/main") for k in extra)
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert store.series_count == max_series
    assert store.point_count == max_series * points
    assert used <= store.memory_budget_bytes == memory_budget_bytes(max_series, points)
    # The budget is not a loose guess either: the points alone are most of it.
    assert used >= max_series * points * BYTES_PER_POINT
