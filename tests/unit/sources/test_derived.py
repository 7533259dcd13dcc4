from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from daemon.sources.derived import DERIVED_SIGNALS, DerivedValue, derive
from daemon.sources.samples import Sample, SeriesKey, labels_of
from daemon.sources.store import SignalStore

MAIN = {"instance": "main", "model_name": "m"}


def _counter(
    store: SignalStore, name: str, points: list[tuple[float, float]], **labels: str
) -> None:
    key = SeriesKey(name, labels_of({**MAIN, **labels}))
    store.add(Sample(key, value, at, "vllm/main") for at, value in points)


def _histogram(store: SignalStore, base: str, at: float, cumulative: dict[float, float]) -> None:
    for bound, count in cumulative.items():
        le = "+Inf" if math.isinf(bound) else str(bound)
        key = SeriesKey(base + "_bucket", labels_of({**MAIN, "le": le}))
        store.add([Sample(key, count, at, "vllm/main")])


def _values(derived: dict[Any, DerivedValue]) -> dict[Any, float | None]:
    return {labels: entry.value for labels, entry in derived.items()}


def _fresh_for(seconds: float) -> Callable[[SeriesKey], float]:
    return lambda _key: seconds


# Windows are (now - window, now], open on the left: a 61 s window at t=60 includes t=0.


def test_counter_rates_span_a_restart_and_keep_labels() -> None:
    store = SignalStore()
    # 0 -> 30 over 30 s, then vLLM restarts (reset to 0) and counts 6 more by t=60.
    _counter(store, "vllm_num_preemptions_total", [(0, 0), (15, 12), (30, 30), (45, 0), (60, 6)])
    rates = _values(
        derive(store, DERIVED_SIGNALS["vllm_preemptions_per_s"], 60, 61, _fresh_for(10))
    )
    assert rates == {labels_of(MAIN): pytest.approx(36 / 60)}


def test_requests_finished_are_derived_per_finished_reason() -> None:
    store = SignalStore()
    _counter(store, "vllm_request_success_total", [(0, 0), (60, 120)], finished_reason="stop")
    _counter(store, "vllm_request_success_total", [(0, 5), (60, 5)], finished_reason="abort")
    rates = _values(
        derive(store, DERIVED_SIGNALS["vllm_requests_finished_per_s"], 60, 61, _fresh_for(10))
    )
    assert rates == {
        labels_of({**MAIN, "finished_reason": "stop"}): 2.0,
        labels_of({**MAIN, "finished_reason": "abort"}): 0.0,
    }


def test_quantiles_come_from_the_windows_bucket_deltas() -> None:
    store = SignalStore()
    # Before the window: 1000 fast requests. Inside it: 100 more, 90 under 1 s, 10 in (1, 2.5].
    _histogram(store, "vllm_ttft_seconds", 0, {0.5: 1000, 1.0: 1000, 2.5: 1000, math.inf: 1000})
    _histogram(store, "vllm_ttft_seconds", 60, {0.5: 1000, 1.0: 1090, 2.5: 1100, math.inf: 1100})
    p50 = _values(derive(store, DERIVED_SIGNALS["vllm_ttft_p50_s"], 60, 61, _fresh_for(10)))
    p95 = _values(derive(store, DERIVED_SIGNALS["vllm_ttft_p95_s"], 60, 61, _fresh_for(10)))
    # p50: rank 50 of 90 in (0.5, 1.0] -> 0.5 + 0.5 * 50/90; p95: rank 95 -> 1.0 + 1.5 * 5/10.
    assert p50 == {labels_of(MAIN): pytest.approx(0.5 + 0.5 * 50 / 90)}
    assert p95 == {labels_of(MAIN): pytest.approx(1.75)}


def test_nothing_is_derived_from_stale_data() -> None:
    store = SignalStore()
    _counter(store, "vllm_num_preemptions_total", [(0, 0), (30, 30)])
    _histogram(store, "vllm_ttft_seconds", 0, {1.0: 0, math.inf: 0})
    _histogram(store, "vllm_ttft_seconds", 30, {1.0: 5, math.inf: 5})
    # At t=60 the newest points are 30 s old, beyond a 10 s staleness limit, though they still
    # cover half of the 60 s window.
    assert _values(
        derive(store, DERIVED_SIGNALS["vllm_preemptions_per_s"], 60, 60, _fresh_for(10))
    ) == {labels_of(MAIN): None}
    assert _values(derive(store, DERIVED_SIGNALS["vllm_ttft_p95_s"], 60, 60, _fresh_for(10))) == {
        labels_of(MAIN): None
    }


def test_a_window_not_yet_covered_is_no_data_not_zero() -> None:
    store = SignalStore()
    _counter(store, "vllm_num_preemptions_total", [(55, 0), (60, 0)])
    assert _values(
        derive(store, DERIVED_SIGNALS["vllm_preemptions_per_s"], 60, 60, _fresh_for(10))
    ) == {labels_of(MAIN): None}
