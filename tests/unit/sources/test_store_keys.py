"""The store's keys of a name are the series it holds now, in their order, as they come and go.

The store keeps each name's keys sorted between changes; whatever changed them (a new series, a
series forgotten, evicted for another source, or no longer scraped), it must answer as a look
through the series it holds would.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.sources.samples import Sample, SeriesKey, labels_of
from daemon.sources.store import SignalStore

NAMES = ("vllm_ttft_seconds_bucket", "vllm_num_requests_running")
KEYS = [
    SeriesKey(name, labels_of({"instance": instance, "le": le}))
    for name in NAMES
    for instance in ("a", "b")
    for le in ("0.1", "1.0", "+Inf")
]

# One step: a sample of a key (by index) from source a or b, after a pause; or a key forgotten.
_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "forget"]),
        st.integers(0, len(KEYS) - 1),
        st.sampled_from(["a", "b"]),
        st.floats(0.0, 5.0, allow_nan=False),
    ),
    max_size=40,
)


@settings(max_examples=300)
@given(steps=_STEPS, max_series=st.integers(1, 12), forget_after_s=st.sampled_from([4.0, 1e9]))
def test_keys_are_the_series_held_now(
    steps: list[tuple[str, int, str, float]], max_series: int, forget_after_s: float
) -> None:
    store = SignalStore(points_per_series=3, max_series=max_series, forget_after_s=forget_after_s)
    at = 0.0
    for kind, index, source, pause in steps:
        at += pause
        if kind == "add":
            store.add_scrape([Sample(KEYS[index], 1.0, at, f"vllm/{source}")])
        else:
            store.forget(KEYS[index])
        for name in NAMES:
            held = [key for key in KEYS if key.name == name and store.source_of(key) is not None]
            assert store.keys(name) == sorted(held, key=lambda key: key.labels)
            assert store.keys(name, instance="a") == [
                key for key in store.keys(name) if key.label("instance") == "a"
            ]
