"""Derived signals: rates of counters and quantiles of histograms over a window, computed here.

The governor must work with no Prometheus at all, so it derives what policies need from the raw
samples it scraped itself: ``vllm_preemptions_per_s`` is the per-second increase of
``vllm_num_preemptions_total`` over the window; ``vllm_ttft_p95_s`` is the 95th percentile of
the time-to-first-token observations made inside the window, from bucket deltas.

Nothing is derived from stale data: when the newest point of a base series is older than the
source's staleness limit, the derived value is None even if older points still fill the window.
Nor from implausible data: a base counter that fell without resetting, or holds a value that
is no count, gives None with the reason (``implausible``), never a rate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

from daemon.sources.derivations import (
    bucket_quantile,
    counter_increase,
    counter_increase_of_columns,
    counter_rate,
)
from daemon.sources.domains import Implausible
from daemon.sources.samples import Labels, SeriesKey
from daemon.sources.store import SignalStore

StaleAfter = Callable[[SeriesKey], float]
# A histogram's bucket increases over the window by (base, labels), kept for one view: its
# p50, p95 and p99 read the same increases. None: not enough fresh data; a string: why the
# buckets are implausible.
BucketMemo = dict[tuple[str, Labels], list[tuple[float, float]] | str | None]
# A histogram's bucket series and the time of their newest point, by the histogram's base name
# and labels: found once per view for its p50, p95 and p99.
HistogramMemo = dict[str, dict[Labels, tuple[list[SeriesKey], float | None]]]


@dataclass(frozen=True, slots=True)
class DerivedValue:
    """A derived value (None: not enough fresh data) and the time of its newest base point.

    ``implausible`` says why the base data cannot be believed ("" when they can); the value is
    then None.
    """

    value: float | None
    newest_at: float | None
    implausible: str = ""


@dataclass(frozen=True, slots=True)
class DerivedSignal:
    """How one derived signal is computed.

    Attributes:
        name: Name policies use (``vllm_ttft_p95_s``).
        base: Canonical base series: a counter, or a histogram's base name.
        quantile: For histograms, the quantile (0.95); None for a counter's per-second rate.
        meaning: One line for people.
    """

    name: str
    base: str
    quantile: float | None
    meaning: str


def _rate(name: str, base: str, meaning: str) -> DerivedSignal:
    return DerivedSignal(name, base, None, meaning)


def _quantiles(stem: str, base: str, what: str) -> list[DerivedSignal]:
    return [
        DerivedSignal(f"{stem}_p{percent}_s", base, percent / 100, f"{what}, p{percent}, seconds")
        for percent in (50, 95, 99)
    ]


DERIVED_SIGNALS: Mapping[str, DerivedSignal] = {
    signal.name: signal
    for signal in [
        _rate("vllm_preemptions_per_s", "vllm_num_preemptions_total", "Preemptions per second"),
        _rate("vllm_prompt_tokens_per_s", "vllm_prompt_tokens_total", "Prompt tokens per second"),
        _rate(
            "vllm_generation_tokens_per_s",
            "vllm_generation_tokens_total",
            "Generated tokens per second",
        ),
        _rate(
            "vllm_requests_finished_per_s",
            "vllm_request_success_total",
            "Finished requests per second, by finished_reason (stop, length, abort, error)",
        ),
        _rate(
            "vllm_admission_rejections_per_s",
            "vllm_admission_rejections_total",
            "Requests refused by vLLM's admission limits per second",
        ),
        _rate(
            "haproxy_sessions_per_s",
            "haproxy_sessions_total",
            "Sessions an HAProxy server let through to its backend server per second",
        ),
        _rate(
            "haproxy_backend_5xx_per_s",
            "haproxy_backend_http_5xx_total",
            "5xx answers of an HAProxy backend per second, its own 503s (queue timeouts) included",
        ),
        *_quantiles("vllm_ttft", "vllm_ttft_seconds", "Time to first token"),
        *_quantiles("vllm_itl", "vllm_itl_seconds", "Inter-token latency (TPOT)"),
        *_quantiles(
            "vllm_request_tpot",
            "vllm_request_tpot_seconds",
            "Mean time per output token of each finished request",
        ),
        *_quantiles("vllm_e2e", "vllm_e2e_seconds", "End-to-end request latency"),
        *_quantiles("vllm_queue", "vllm_queue_seconds", "Time spent waiting in the queue"),
    ]
}


def derive(
    store: SignalStore,
    signal: DerivedSignal,
    now: float,
    window_s: float,
    stale_after: StaleAfter,
    *,
    memo: BucketMemo | None = None,
    histograms: HistogramMemo | None = None,
) -> dict[Labels, DerivedValue]:
    """The derived value for every label set of the base series, None where data is lacking.

    ``memo`` keeps each histogram's bucket increases, and ``histograms`` its bucket series, for
    the other quantiles of one view.
    """
    results: dict[Labels, DerivedValue] = {}
    if signal.quantile is None:
        for key in store.keys(signal.base):
            rate = partial(_rate_of, store, key, now, window_s, stale_after)
            results[key.labels] = _believed(rate, signal.base, _newest(store, [key]))
        return results
    for labels, (buckets, newest) in _histograms_of(store, signal.base, histograms).items():
        quantile = partial(
            _quantile_of,
            store,
            buckets,
            signal.quantile,
            now=now,
            window_s=window_s,
            stale_after=stale_after,
            memo=memo if memo is not None else {},
            memo_key=(signal.base, labels),
        )
        results[labels] = _believed(quantile, signal.base, newest)
    return results


def _histograms_of(
    store: SignalStore, base: str, memo: HistogramMemo | None
) -> dict[Labels, tuple[list[SeriesKey], float | None]]:
    """Each histogram of ``base``: its bucket series and their newest point's time."""
    found = memo.get(base) if memo is not None else None
    if found is None:
        found = {
            labels: (buckets, _newest(store, buckets))
            for labels, buckets in _histograms(store, base + "_bucket").items()
        }
        if memo is not None:
            memo[base] = found
    return found


def _believed(
    compute: Callable[[], float | None], base: str, newest_at: float | None
) -> DerivedValue:
    """The computed value, or None with the reason when its base data are implausible."""
    try:
        return DerivedValue(compute(), newest_at)
    except Implausible as exc:
        return DerivedValue(None, newest_at, f"{base}: {exc}")


def _newest(store: SignalStore, keys: list[SeriesKey]) -> float | None:
    times = [point[0] for key in keys if (point := store.latest(key)) is not None]
    return max(times) if times else None


def _fresh(store: SignalStore, key: SeriesKey, now: float, stale_after: StaleAfter) -> bool:
    newest = store.latest(key)
    return newest is not None and now - newest[0] <= stale_after(key)


def _rate_of(
    store: SignalStore, key: SeriesKey, now: float, window_s: float, stale_after: StaleAfter
) -> float | None:
    if not _fresh(store, key, now, stale_after):
        return None
    return counter_rate(store.points(key, since=now - window_s), window_s, now)


def _histograms(store: SignalStore, bucket_name: str) -> dict[Labels, list[SeriesKey]]:
    """Bucket series grouped by their labels without ``le``: one group per histogram."""
    groups: dict[Labels, list[SeriesKey]] = {}
    for key in store.keys(bucket_name):
        labels = tuple(pair for pair in key.labels if pair[0] != "le")
        groups.setdefault(labels, []).append(key)
    return groups


def _quantile_of(
    store: SignalStore,
    buckets: list[SeriesKey],
    q: float,
    *,
    now: float,
    window_s: float,
    stale_after: StaleAfter,
    memo: BucketMemo,
    memo_key: tuple[str, Labels],
) -> float | None:
    if memo_key not in memo:
        try:
            memo[memo_key] = _bucket_increases(store, buckets, now, window_s, stale_after)
        except Implausible as exc:
            memo[memo_key] = str(exc)
    increases = memo[memo_key]
    if isinstance(increases, str):
        raise Implausible(increases)
    return None if increases is None else bucket_quantile(q, increases)


def _bucket_increases(
    store: SignalStore,
    buckets: list[SeriesKey],
    now: float,
    window_s: float,
    stale_after: StaleAfter,
) -> list[tuple[float, float]] | None:
    """Each bucket's increase over the window by its bound, as histogram_quantile takes them."""
    if not all(_fresh(store, key, now, stale_after) for key in buckets):
        return None
    by_bound = {float(key.label("le") or "nan"): key for key in buckets}
    since = now - window_s
    increases = []
    for upper, key in by_bound.items():
        # A polled series keeps its points as columns: read so, with no point made of each.
        columns = store.point_columns(key, since)
        if columns is None:
            increase = counter_increase(store.points(key, since), window_s, now)
        else:
            increase = counter_increase_of_columns(*columns, window_s, now)
        if increase is None:
            return None
        increases.append((upper, increase))
    return increases
