"""The recent workload of one vLLM instance, from its stored metrics: no request log needed.

What vLLM's metrics say, and what is read from them, over the window ``(now - window_s, now]``
of one instance's aggregate series (those without ``engine``):

* **Arrivals.** vLLM counts requests when they end (``request_success_total``, every
  ``finished_reason``) or are refused (``admission_rejections_total``); those that arrived but
  have not ended are the growth of ``num_requests_running + num_requests_waiting``. So the
  arrivals of one scrape interval are its finished plus refused requests plus that growth, and
  the rate is their sum over the seconds between the first and the last scrape. A drop of the
  counters to near zero is a restart (:func:`daemon.sources.derivations.is_reset`).
* **The gate's demand.** Behind an admission gate vLLM counts only what the gate let in. The
  gate's refusals and the growth of its queue over each interval
  (:mod:`~daemon.whatif.gate_demand`) are added to vLLM's arrivals of that interval, so the
  rate is the demand, not what was admitted. The refused and queued requests are assumed to
  be like the admitted ones: vLLM's histograms never see their lengths.
* **Burstiness.** The arrivals per scrape interval vary; their coefficient of variation
  (``count_cv``) depends on the interval, so what synthesis uses is the inter-arrival CV of a
  renewal process with the same counts: for windows long against the mean gap, the counts'
  variance over their mean (the index of dispersion) tends to the square of that CV.
* **Lengths.** ``request_prompt_tokens`` and ``request_generation_tokens`` observe every
  finished request; each bucket's increase over the window gives the window's histogram, from
  which percentiles are interpolated as Prometheus does and a log-normal is fitted
  (:mod:`~daemon.whatif.lognormal_fit`).

Too little data is an error (:class:`~daemon.whatif.errors.WhatIfError`), never a guess.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from daemon.sources.derivations import bucket_quantile, counter_increase
from daemon.sources.domains import Implausible
from daemon.sources.samples import SeriesKey
from daemon.whatif.errors import WhatIfError
from daemon.whatif.gate_demand import counter_rise, gate_counts
from daemon.whatif.lognormal_fit import fit_lognormal
from daemon.whatif.series_snapshot import SeriesReader
from daemon.whatif.summary import GateDemand, LengthSummary, WorkloadSummary

MIN_REQUESTS = 20
"""Fewer finished requests than this in the window tell too little of a workload to plan on."""

# The inter-arrival CV used for synthesis is kept inside what the generator handles well: a
# near-deterministic stream (cv -> 0) or a CV of tens (a few giant clumps) are artefacts of a
# short window more often than they are the workload.
_CV_RANGE = (0.3, 4.0)


@dataclass(frozen=True, slots=True)
class StepObservations:
    """What the engine's steps did over the window, for the profile check.

    Attributes:
        window_s: Seconds covered.
        steps_per_s: Engine steps per second (``iteration_tokens`` count rate).
        tokens_per_step: Mean tokens scheduled per step.
        prompt_tokens_per_s: Prefill tokens per second.
        generation_tokens_per_s: Decode tokens per second.
        mean_running: Mean of ``num_requests_running`` over the scrapes.
        busy_share: Share of scrapes at which a request was running.
    """

    window_s: float
    steps_per_s: float
    tokens_per_step: float
    prompt_tokens_per_s: float
    generation_tokens_per_s: float
    mean_running: float
    busy_share: float


def characterise(
    store: SeriesReader,
    instance: str,
    now: float,
    window_s: float,
    *,
    min_requests: int = MIN_REQUESTS,
) -> WorkloadSummary:
    """The workload of ``instance`` over ``(now - window_s, now]`` (see the module docstring).

    Raises:
        WhatIfError: the instance has no series, too few scrapes or finished requests in the
            window, or a counter that fell without a restart.
    """
    since = now - window_s
    try:
        stamps, admitted = _arrivals_per_scrape(store, instance, since)
        gate = gate_counts(store, instance, stamps)
        prompt = _lengths(store, "vllm_request_prompt_tokens", instance, now, window_s)
        output = _lengths(store, "vllm_request_generation_tokens", instance, now, window_s)
    except Implausible as exc:
        message = f"{instance}: a counter is not usable over the window: {exc}"
        raise WhatIfError(message) from exc
    if prompt.requests < min_requests:
        message = (
            f"{instance}: only {prompt.requests:g} requests finished in the last {window_s:g} s;"
            f" a what-if needs at least {min_requests} (wait for traffic, or widen --window)"
        )
        raise WhatIfError(message)
    span = stamps[-1] - stamps[0]
    arrivals = admitted
    demand = None
    if gate is not None:
        # A queue that shrank hands its requests to vLLM, which counts them again: the sum
        # per interval is what arrived at the gate, never below nothing.
        arrivals = [
            max(came + refused + queued, 0.0)
            for came, refused, queued in zip(admitted, gate.refused, gate.queued, strict=True)
        ]
        demand = GateDemand(
            admitted_rps=math.fsum(admitted) / span,
            refused_rps=math.fsum(gate.refused) / span,
            queued_rps=math.fsum(gate.queued) / span,
            cap=gate.cap,
        )
    mean = statistics.fmean(arrivals)
    variance = statistics.pvariance(arrivals, mu=mean)
    dispersion = math.sqrt(variance / mean) if mean > 0 else 1.0
    return WorkloadSummary(
        instance=instance,
        window_s=span,
        scrapes=len(arrivals),
        rate_rps=sum(arrivals) / span,
        count_cv=math.sqrt(variance) / mean if mean > 0 else 0.0,
        arrival_cv=min(max(dispersion, _CV_RANGE[0]), _CV_RANGE[1]),
        scrape_interval_s=span / len(arrivals),
        prompt=prompt,
        output=output,
        gate=demand,
    )


def observe_steps(
    store: SeriesReader, instance: str, now: float, window_s: float
) -> StepObservations | None:
    """The engine's step rate and mix over the window, or None when a series is missing."""
    try:
        steps = _increase(store, "vllm_iteration_tokens_count", instance, now, window_s)
        tokens = _increase(store, "vllm_iteration_tokens_sum", instance, now, window_s)
        prompt = _increase(store, "vllm_prompt_tokens_total", instance, now, window_s)
        output = _increase(store, "vllm_generation_tokens_total", instance, now, window_s)
    except Implausible:
        return None
    running = [
        value
        for key in _keys(store, "vllm_num_requests_running", instance)
        for _, value in store.points(key, since=now - window_s)
    ]
    span = _span(store, "vllm_iteration_tokens_count", instance, now - window_s)
    if None in (steps, tokens, prompt, output) or not running or not span:
        return None
    assert steps is not None
    assert tokens is not None
    assert prompt is not None
    assert output is not None
    return StepObservations(
        window_s=span,
        steps_per_s=steps / span,
        tokens_per_step=tokens / steps if steps else 0.0,
        prompt_tokens_per_s=prompt / span,
        generation_tokens_per_s=output / span,
        mean_running=statistics.fmean(running),
        busy_share=sum(1 for value in running if value > 0) / len(running),
    )


def _keys(store: SeriesReader, name: str, instance: str) -> list[SeriesKey]:
    """The instance's aggregate series of ``name``: per-engine ones are left out."""
    return [key for key in store.keys(name, instance=instance) if key.label("engine") is None]


def _totals(store: SeriesReader, name: str, instance: str, since: float) -> dict[float, float]:
    """Sum over the label sets of ``name`` at each scrape time all of them were read."""
    keys = _keys(store, name, instance)
    by_time: dict[float, list[float]] = {}
    for key in keys:
        for at, value in store.points(key, since=since):
            by_time.setdefault(at, []).append(value)
    return {at: math.fsum(values) for at, values in by_time.items() if len(values) == len(keys)}


def _arrivals_per_scrape(
    store: SeriesReader, instance: str, since: float
) -> tuple[list[float], list[float]]:
    finished = _totals(store, "vllm_request_success_total", instance, since)
    refused = _totals(store, "vllm_admission_rejections_total", instance, since)
    running = _totals(store, "vllm_num_requests_running", instance, since)
    waiting = _totals(store, "vllm_num_requests_waiting", instance, since)
    stamps = sorted(set(finished) & set(running) & set(waiting))
    if refused:
        stamps = [at for at in stamps if at in refused]
    if len(stamps) < 3:
        message = (
            f"{instance}: {len(stamps)} scrape(s) with requests counted in the window; is it"
            " configured and up (vllm-governor signals)?"
        )
        raise WhatIfError(message)
    arrivals = []
    for before, after in itertools.pairwise(stamps):
        grown = running[after] + waiting[after] - running[before] - waiting[before]
        came = counter_rise(finished[before], finished[after]) + grown
        if refused:
            came += counter_rise(refused[before], refused[after])
        # A restart aborts what ran; what vLLM did not count cannot be told apart from a
        # negative growth, so such an interval counts no arrivals rather than minus some.
        arrivals.append(max(came, 0.0))
    return stamps, arrivals


def _increase(
    store: SeriesReader, name: str, instance: str, now: float, window_s: float
) -> float | None:
    """The summed increase of ``name``'s series over the window; None when one has no data."""
    total = 0.0
    keys = _keys(store, name, instance)
    if not keys:
        return None
    for key in keys:
        points = store.points(key, since=now - window_s)
        rise = counter_increase(points, window_s, now, min_coverage=0.0)
        if rise is None:
            return None
        total += rise
    return total


def _span(store: SeriesReader, name: str, instance: str, since: float) -> float:
    stamps = sorted(_totals(store, name, instance, since))
    return stamps[-1] - stamps[0] if len(stamps) >= 2 else 0.0


def _lengths(
    store: SeriesReader, base: str, instance: str, now: float, window_s: float
) -> LengthSummary:
    count = _increase(store, base + "_count", instance, now, window_s)
    total = _increase(store, base + "_sum", instance, now, window_s)
    cumulative: dict[float, float] = {}
    for key in _keys(store, base + "_bucket", instance):
        bound = float(key.label("le") or "nan")
        rise = counter_increase(
            store.points(key, since=now - window_s), window_s, now, min_coverage=0.0
        )
        if rise is None or math.isnan(bound):
            continue
        cumulative[bound] = cumulative.get(bound, 0.0) + rise
    if count is None or total is None or math.inf not in cumulative:
        message = (
            f"{instance}: vLLM's {base.removeprefix('vllm_')} histogram is missing from its"
            " metrics (vLLM exposes it since V1; is --disable-log-stats set?)"
        )
        raise WhatIfError(message)
    pairs = sorted(cumulative.items())
    quantiles = [bucket_quantile(q, pairs) or 0.0 for q in (0.5, 0.9, 0.99)]
    per_bucket = list(_per_bucket(pairs))
    mean = total / count if count else 0.0
    return LengthSummary(
        requests=count,
        mean=mean,
        p50=quantiles[0],
        p90=quantiles[1],
        p99=quantiles[2],
        fit=fit_lognormal(per_bucket, quantiles[0], quantiles[1], mean),
        max_tokens=_top(per_bucket, quantiles[2]),
    )


def _per_bucket(pairs: Iterable[tuple[float, float]]) -> Iterable[tuple[float, float]]:
    """Cumulative counts to counts per bucket (forced monotonic, as Prometheus does)."""
    highest = 0.0
    for bound, count in pairs:
        reached = max(count, highest)
        yield bound, reached - highest
        highest = reached


def _top(per_bucket: list[tuple[float, float]], p99: float) -> int:
    """The longest length to synthesise: the top of the highest bucket that saw any."""
    finite = [bound for bound, count in per_bucket if count > 0 and math.isfinite(bound)]
    highest = max(finite, default=1.0)
    if per_bucket and per_bucket[-1][1] > 0 and len(per_bucket) >= 2:
        highest = 2 * per_bucket[-2][0]  # some went past the last bound: allow up to twice it
    return max(1, math.ceil(max(highest, p99)))
