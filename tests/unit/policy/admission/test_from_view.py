"""The mapping from a policy's view to an admission controller's signals, and the gate's names."""

from __future__ import annotations

import math
from typing import Any

from daemon.policy.admission.from_view import FIELD_SIGNALS, SIGNALS_READ, admission_signals
from daemon.policy.admission.signals import SIGNAL_NAMES, AdmissionSignals
from daemon.policy.evaluate import TargetView
from daemon.policy.views import target_views
from daemon.sources.catalogue import CATALOGUE
from daemon.sources.samples import Sample, SeriesKey, labels_of
from daemon.sources.store import SignalStore
from daemon.sources.view import ViewContext, signal_rows

FULL = {
    "gate_cap": 48.0,
    "gate_in_flight": 40.0,
    "gate_queue": 7.0,
    "ttft_p50_s": 0.2,
    "ttft_p95_s": 0.9,
    "tpot_p95_s": 0.09,  # per token: not what the controllers read
    "request_tpot_p95_s": 0.04,
    "preemptions_per_s": 0.5,
    "errors_per_s": 0.25,
    "rejections_per_s": 1.0,
    "gate_refusals_per_s": 2.0,
    "gate_admitted_per_s": 6.0,
    "gen_tokens_per_s": 900.0,
}


def view(**signals: Any) -> TargetView:
    return TargetView("a", signals, {"max_num_seqs": 64.0})


def test_every_field_from_its_catalogue_name() -> None:
    assert admission_signals(view(**FULL)) == AdmissionSignals(
        cap=48.0,
        in_flight=40.0,
        queued=7.0,
        latency_s=0.2,
        ttft_p95_s=0.9,
        tpot_p95_s=0.04,
        preemptions_per_s=0.5,
        vllm_errors_per_s=1.25,
        gate_refusals_per_s=2.0,
        gate_admitted_per_s=6.0,
        gen_tokens_per_s=900.0,
    )


def test_every_name_read_is_in_the_catalogue_and_every_field_is_filled() -> None:
    assert set(FIELD_SIGNALS.values()) <= set(CATALOGUE)
    assert set(FIELD_SIGNALS) | {"vllm_errors_per_s"} == set(SIGNAL_NAMES)


def test_an_empty_view_is_all_none() -> None:
    signals = admission_signals(view())
    assert signals.missing(SIGNAL_NAMES) == SIGNAL_NAMES


def test_errors_without_rejections_are_the_errors_alone() -> None:
    without = {k: v for k, v in FULL.items() if k != "rejections_per_s"}
    assert admission_signals(view(**without)).vllm_errors_per_s == 0.25


def test_rejections_without_errors_are_no_data() -> None:
    without = {k: v for k, v in FULL.items() if k != "errors_per_s"}
    assert admission_signals(view(**without)).vllm_errors_per_s is None


def test_a_non_number_or_non_finite_value_is_missing() -> None:
    signals = admission_signals(
        view(gate_cap=math.nan, gate_queue=math.inf, gate_in_flight={"x": 1.0}, ttft_p50_s=True)
    )
    assert signals.cap is None
    assert signals.queued is None
    assert signals.in_flight is None
    assert signals.latency_s is None


def _haproxy_store(now: float) -> SignalStore:
    """What the HAProxy source writes for a server fronting instance ``a``, over 30 s."""
    store = SignalStore()
    server = labels_of({"backend": "vllm", "server": "a", "instance": "a"})
    backend = labels_of({"backend": "vllm", "instance": "a"})
    for t in range(0, 31, 5):
        at = now - 30 + t
        store.add(
            [
                Sample(SeriesKey("haproxy_server_maxconn", server), 32.0, at, "haproxy-a"),
                Sample(SeriesKey("haproxy_sessions_current", server), 30.0, at, "haproxy-a"),
                Sample(SeriesKey("haproxy_queue_current", server), 5.0, at, "haproxy-a"),
                Sample(SeriesKey("haproxy_queue_time_seconds", server), 0.4, at, "haproxy-a"),
                Sample(SeriesKey("haproxy_backend_http_5xx_total", backend), t, at, "haproxy-a"),
                Sample(SeriesKey("haproxy_sessions_total", server), 3.0 * t, at, "haproxy-a"),
            ]
        )
    return store


def test_the_haproxy_source_series_reach_the_view_under_the_gate_names() -> None:
    now = 1000.0
    context = ViewContext(now=now, window_s=30.0, stale_after=lambda _key: 10.0, targets=("a",))
    views = target_views(signal_rows(_haproxy_store(now), context), ["a"])
    signals = views["a"].signals
    assert signals["gate_cap"] == 32.0
    assert signals["gate_in_flight"] == 30.0
    assert signals["gate_queue"] == 5.0
    assert signals["gate_queue_time_s"] == 0.4
    assert math.isclose(signals["gate_refusals_per_s"], 1.0)
    assert math.isclose(signals["gate_admitted_per_s"], 3.0)
    mapped = admission_signals(views["a"])
    assert (mapped.cap, mapped.in_flight, mapped.queued) == (32.0, 30.0, 5.0)
    assert mapped.gate_admitted_per_s is not None
    assert math.isclose(mapped.gate_admitted_per_s, 3.0)


def test_a_stale_gate_reaches_no_view() -> None:
    now = 1000.0
    later = ViewContext(now=now + 60, window_s=30.0, stale_after=lambda _k: 10.0, targets=("a",))
    views = target_views(signal_rows(_haproxy_store(now), later), ["a"])
    assert not any(name.startswith("gate_") for name in views["a"].signals)
    assert admission_signals(views["a"]).cap is None


def test_the_fast_loop_computes_only_what_the_controllers_read() -> None:
    now = 1000.0
    store = _haproxy_store(now)
    every = ViewContext(now=now, window_s=30.0, stale_after=lambda _key: 10.0, targets=("a",))
    fast = ViewContext(
        now=now,
        window_s=30.0,
        stale_after=lambda _key: 10.0,
        targets=("a",),
        only=SIGNALS_READ,
    )
    all_rows, read_rows = signal_rows(store, every), signal_rows(store, fast)
    assert {row.name for row in read_rows} == SIGNALS_READ
    assert len(read_rows) < len(all_rows) / 3
    # The same controller signals either way.
    assert admission_signals(target_views(read_rows, ["a"])["a"]) == admission_signals(
        target_views(all_rows, ["a"])["a"]
    )
