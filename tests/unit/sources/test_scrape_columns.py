"""Series on a shared scrape column read back the points they were given, as a ring would."""

from __future__ import annotations

import tracemalloc

from hypothesis import given
from hypothesis import strategies as st

from daemon.sources.samples import Sample, SeriesKey, labels_of
from daemon.sources.scrape_columns import BYTES_PER_POINT, ColumnRing, ScrapeTimes, append_scrape
from daemon.sources.series_ring import BYTES_PER_POINT as RING_BYTES_PER_POINT
from daemon.sources.store import SignalStore

# A scrape: how long after the one before it came (0: the same scrape again), and whether it
# had a value of the series.
_SCRAPES = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=5.0, allow_nan=False), st.booleans()),
    max_size=60,
)


@given(
    capacity=st.integers(min_value=1, max_value=16),
    scrapes=_SCRAPES,
    since=st.floats(min_value=-1.0, max_value=300.0, allow_nan=False),
)
def test_a_series_keeps_its_values_of_the_last_scrapes_of_its_source(
    capacity: int, scrapes: list[tuple[float, bool]], since: float
) -> None:
    times = ScrapeTimes(capacity)
    ring = ColumnRing(times, capacity, "vllm/main")
    given_points: dict[int, tuple[float, float]] = {}  # scrape -> the series' point there
    at = 0.0
    for value, (step, present) in enumerate(scrapes):
        at += step
        seq = times.stamp(at)
        assert seq is not None
        if present:
            ring.append_at(seq, at, float(value))
            given_points[seq] = (at, float(value))
    newest_seq = max(given_points, default=-1)
    oldest_kept = max(times.count - capacity, newest_seq - capacity + 1)
    kept = [point for seq, point in sorted(given_points.items()) if seq >= oldest_kept]
    if given_points and not kept:
        kept = [given_points[newest_seq]]  # its newest point outlives its scrape's time
    assert len(ring) == len(kept)
    assert ring.since(since) == [point for point in kept if point[0] >= since]
    assert ring.newest() == (given_points[newest_seq] if given_points else None)


def test_a_scrape_older_than_the_newest_is_refused() -> None:
    times = ScrapeTimes(4)
    assert (times.stamp(2.0), times.stamp(2.0), times.stamp(1.0), times.stamp(3.0)) == (
        0,
        0,
        None,
        1,
    )


def test_a_point_of_a_polled_source_weighs_half_what_a_ring_s_does() -> None:
    """A vLLM server's 244 series, added a scrape at a time: the cost of 32 more scrapes."""
    keys = [SeriesKey("vllm_x_bucket", labels_of({"le": str(n)})) for n in range(244)]

    def weight(points: int, *, scraped: bool) -> int:
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            store = SignalStore(points_per_series=points)
            for at in range(points):
                samples = [Sample(key, float(at), float(at), "vllm/main") for key in keys]
                if scraped:
                    store.add_scrape(samples)
                else:
                    store.add(samples)
            used = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert store.point_count == len(keys) * points
        assert store.points(keys[0], since=points - 2.0) == [
            (points - 2.0, points - 2.0),
            (points - 1.0, points - 1.0),
        ]
        return used

    def per_point(*, scraped: bool) -> float:
        grown = weight(64, scraped=scraped) - weight(32, scraped=scraped)
        return grown / (len(keys) * 32)

    assert per_point(scraped=False) >= RING_BYTES_PER_POINT
    # The shared column and what tracemalloc itself notes come to well under a byte a point.
    assert per_point(scraped=True) <= BYTES_PER_POINT + 1 == RING_BYTES_PER_POINT / 2 + 1


def test_a_store_reads_a_scraped_series_back_with_its_gaps() -> None:
    running = SeriesKey("vllm_num_requests_running", labels_of({"instance": "main"}))
    health = SeriesKey("vllm_health_ok", labels_of({"instance": "main"}))
    store = SignalStore(points_per_series=3)
    for at in (1.0, 2.0, 3.0, 4.0):
        scrape = [Sample(running, at * 10, at, "vllm/main")]
        if at != 3.0:  # a slow health check: no sample this time
            scrape.append(Sample(health, 1.0, at, "vllm/main"))
        store.add_scrape(scrape)
    store.add_scrape([Sample(running, 99.0, 3.5, "vllm/main")])  # older than the newest
    assert store.points(running) == [(2.0, 20.0), (3.0, 30.0), (4.0, 40.0)]
    assert store.points(health) == [(2.0, 1.0), (4.0, 1.0)]
    assert store.latest(health) == (4.0, 1.0)
    assert store.point_count == 5


@given(
    capacity=st.integers(min_value=1, max_value=8),
    scrapes=st.lists(
        st.tuples(
            st.floats(min_value=0.0, max_value=5.0, allow_nan=False),
            st.lists(st.booleans(), min_size=3, max_size=3),
        ),
        max_size=30,
    ),
)
def test_a_scrape_appended_at_once_leaves_each_ring_as_its_own_appends_do(
    capacity: int, scrapes: list[tuple[float, list[bool]]]
) -> None:
    one_by_one, at_once = ScrapeTimes(capacity), ScrapeTimes(capacity)
    singles = [ColumnRing(one_by_one, capacity, "vllm/main") for _ in range(3)]
    together = [ColumnRing(at_once, capacity, "vllm/main") for _ in range(3)]
    at = 0.0
    for step, (pause, present) in enumerate(scrapes):
        at += pause
        seq, same_seq = one_by_one.stamp(at), at_once.stamp(at)
        assert seq is not None
        assert seq == same_seq
        values = [float(step * 10 + index) for index in range(3)]
        for ring, value, there in zip(singles, values, present, strict=True):
            if there:
                ring.append_at(seq, at, value)
        chosen = [index for index in range(3) if present[index]]
        append_scrape([together[i] for i in chosen], seq, at, [values[i] for i in chosen])
        for single, joint in zip(singles, together, strict=True):
            assert joint.since(-1.0) == single.since(-1.0)
            assert len(joint) == len(single)
            assert joint.newest() == single.newest()
