"""A poll's samples given as columns leave the store as the same samples one by one would.

The store keeps the series of a source's last columns to append the next ones on the same keys
without looking them up; whatever happens between two polls (series forgotten, evicted for
another source, dropped at a quota, a poll out of order), the store must end as it would have.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.sources.samples import Sample, SampleColumns, SeriesKey, labels_of
from daemon.sources.store import SignalStore

KEYS = [SeriesKey(f"vllm_s{n}", labels_of({"instance": "a"})) for n in range(6)]
# Two pages' keys, each one tuple, as a page's plan gives the same tuple at every scrape.
PAGES = (tuple(KEYS[:4]), tuple(KEYS[2:]))
OTHERS = [SeriesKey("host_x", labels_of({"n": str(n)})) for n in range(4)]

# One step: a poll of source a (page 0 or 1, after a pause, its values; with a health sample
# when the value is positive, as a slow health check gives none), a forgotten series of a, or
# a sample of another source (which may push a's series out of a full store).
_STEPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("poll"),
            st.integers(0, 1),
            st.floats(-1.0, 5.0, allow_nan=False),
            st.floats(-10, 10, allow_nan=False),
        ),
        st.tuples(st.just("forget"), st.integers(0, 5), st.just(0.0), st.just(0.0)),
        st.tuples(
            st.just("other"), st.integers(0, 3), st.floats(0.0, 5.0, allow_nan=False), st.just(0.0)
        ),
    ),
    max_size=40,
)


@settings(max_examples=300)
@given(
    steps=_STEPS,
    max_series=st.integers(2, 10),
    per_source=st.integers(1, 10),
    forget_after_s=st.sampled_from([3.0, 8.0, float("inf")]),
)
def test_columns_leave_the_store_as_their_samples_do(
    steps: list[tuple[str, int, float, float]],
    max_series: int,
    per_source: int,
    forget_after_s: float,
) -> None:
    bounds = {
        "points_per_series": 4,
        "max_series": max_series,
        "max_series_per_source": per_source,
        "forget_after_s": forget_after_s,
    }
    by_columns, by_samples = SignalStore(**bounds), SignalStore(**bounds)  # type: ignore[arg-type]
    at = 0.0
    for kind, which, step, value in steps:
        if kind == "poll":
            at += step  # a negative step: a poll older than the last, refused
            keys = PAGES[which]
            columns = SampleColumns(keys, [value + n for n in range(len(keys))], at, "vllm/a")
            health = (Sample(SeriesKey("vllm_health_ok"), 1.0, at, "vllm/a"),) if value > 0 else ()
            by_columns.add_scrape(health, columns)
            by_samples.add_scrape(columns.samples() + health)
        elif kind == "forget":
            by_columns.forget(KEYS[which])
            by_samples.forget(KEYS[which])
        else:
            sample = Sample(OTHERS[which], 1.0, at + step, "host")
            by_columns.add([sample])
            by_samples.add([sample])
        assert _contents(by_columns) == _contents(by_samples)


def _contents(store: SignalStore) -> tuple[object, ...]:
    every = [*KEYS, *OTHERS, SeriesKey("vllm_health_ok")]
    return (
        [store.points(key) for key in every],
        [store.source_of(key) for key in every],
        store.series_count,
        store.dropped_samples,
        store.evicted_series,
    )
