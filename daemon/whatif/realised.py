"""What a tuned change really did: its service of the workload, measured as the prediction was.

After a tuned change is applied, the governor waits for a window as long as the one the round
characterised, then reads the same instance's metrics over the time since the restart:

* the workload, characterised as for the round (:func:`~daemon.whatif.characterisation.\
characterise`): the realised rate and lengths say whether the window is *comparable* with the
  one predicted for (rate within ``COMPARABLE_RATE`` of it);
* the share of finished requests within each objective, read off vLLM's per-request histograms
  (``time_to_first_token_seconds``, ``request_time_per_output_token_seconds``) at the objective,
  interpolated inside its bucket as Prometheus interpolates quantiles. vLLM does not say which
  request missed which objective, so the share within both is estimated as the product of the
  two (independence), with its bounds (Fréchet: ``max(0, a + b - 1)`` to ``min(a, b)``);
* the realised SLO attainment: requests within both over all arrivals (a request refused,
  aborted or still waiting is a miss, as in the prediction), and the goodput, per second.

The prediction error is of goodput at the realised rate: realised attainment over predicted
attainment, minus one (so a workload a little busier or calmer than the one predicted for does
not count as an error of the model). Pure; the worker process runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from daemon.sources.derivations import counter_increase
from daemon.sources.domains import Implausible
from daemon.whatif.characterisation import characterise
from daemon.whatif.errors import WhatIfError
from daemon.whatif.prediction import Slo
from daemon.whatif.series_snapshot import SeriesReader
from daemon.whatif.summary import WorkloadSummary

COMPARABLE_RATE = 0.25
"""A realised window whose arrival rate differs by more than this share is not comparable."""

HISTOGRAMS = ("vllm_ttft_seconds", "vllm_request_tpot_seconds")
"""The per-request latency histograms the realised effect reads (the store's names)."""


@dataclass(frozen=True, slots=True)
class Realised:
    """The service a setting really gave over a window.

    Attributes:
        workload: The window's workload, characterised as a round does.
        ttft_within: Share of finished requests whose TTFT met the objective.
        tpot_within: Share of finished requests whose TPOT met it.
        slo_attainment: Share of arrivals within both (estimated: see the module docstring).
        slo_attainment_bounds: Its lower and upper bounds.
        goodput_rps: Requests within both per second.
    """

    workload: WorkloadSummary
    ttft_within: float
    tpot_within: float
    slo_attainment: float
    slo_attainment_bounds: tuple[float, float]
    goodput_rps: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        low, high = self.slo_attainment_bounds
        return {
            "window_s": round(self.workload.window_s, 1),
            "rate_rps": round(self.workload.rate_rps, 3),
            "ttft_within": round(self.ttft_within, 4),
            "tpot_within": round(self.tpot_within, 4),
            "slo_attainment": round(self.slo_attainment, 4),
            "slo_attainment_bounds": [round(low, 4), round(high, 4)],
            "goodput_rps": round(self.goodput_rps, 4),
        }


@dataclass(frozen=True, slots=True)
class RealisedCheck:
    """One measurement of a tuned change's effect (picklable: it goes to the worker)."""

    series: SeriesReader
    instance: str
    now: float
    window_s: float
    slo: Slo

    def __call__(self) -> Realised:
        """Measure (see :func:`measure`)."""
        return measure(self.series, self.instance, self.now, self.window_s, self.slo)


def measure(store: SeriesReader, instance: str, now: float, window_s: float, slo: Slo) -> Realised:
    """The service over ``(now - window_s, now]`` (see the module docstring).

    Raises:
        WhatIfError: too little data, or a histogram missing from vLLM's metrics.
    """
    workload = characterise(store, instance, now, window_s)
    ttft = _share_within(store, HISTOGRAMS[0], instance, (now, window_s), slo.ttft_s)
    tpot = _share_within(store, HISTOGRAMS[1], instance, (now, window_s), slo.tpot_s)
    finished_share = min(
        1.0, workload.prompt.requests / max(workload.rate_rps * workload.window_s, 1e-9)
    )
    within = ttft * tpot
    low, high = max(0.0, ttft + tpot - 1.0), min(ttft, tpot)
    attainment = within * finished_share
    return Realised(
        workload=workload,
        ttft_within=ttft,
        tpot_within=tpot,
        slo_attainment=attainment,
        slo_attainment_bounds=(low * finished_share, high * finished_share),
        goodput_rps=attainment * workload.rate_rps,
    )


def prediction_error(predicted_attainment: float, realised: Realised) -> float:
    """Goodput error at the realised rate: realised over predicted attainment, minus one."""
    if predicted_attainment <= 0:
        return 0.0 if realised.slo_attainment <= 0 else float("inf")
    return realised.slo_attainment / predicted_attainment - 1.0


def comparable(predicted_rate_rps: float, realised: Realised) -> str | None:
    """Why the realised window is not comparable with the predicted one, or None when it is."""
    rate = realised.workload.rate_rps
    if predicted_rate_rps <= 0 or abs(rate / predicted_rate_rps - 1.0) > COMPARABLE_RATE:
        return (
            f"the workload changed: {rate:.2f} req/s against the {predicted_rate_rps:.2f}"
            f" predicted for (more than {COMPARABLE_RATE:.0%} apart)"
        )
    return None


def _share_within(
    store: SeriesReader, name: str, instance: str, window: tuple[float, float], limit: float
) -> float:
    """Share of the histogram's observations over ``window`` (now, seconds) at most ``limit``."""
    now, window_s = window
    cumulative: dict[float, float] = {}
    for key in store.keys(name + "_bucket", instance=instance):
        if key.label("engine") is not None:
            continue
        bound = float(key.label("le") or "nan")
        try:
            rise = counter_increase(
                store.points(key, since=now - window_s), window_s, now, min_coverage=0.0
            )
        except Implausible:
            rise = None
        if rise is not None and bound == bound:  # noqa: PLR0124 - NaN is the one unequal to itself
            cumulative[bound] = cumulative.get(bound, 0.0) + rise
    total = cumulative.get(float("inf"))
    if not total:
        message = (
            f"{instance}: no {name.removeprefix('vllm_')} observations in the window (is vLLM's"
            " histogram exposed, and did requests finish?)"
        )
        raise WhatIfError(message)
    lower_bound, lower_count = 0.0, 0.0
    for bound, raw in sorted(cumulative.items()):
        count = max(raw, lower_count)  # forced monotonic, as Prometheus does
        if limit <= bound:
            if bound == float("inf"):
                return lower_count / total
            inside = (limit - lower_bound) / (bound - lower_bound) if bound > lower_bound else 1.0
            return (lower_count + inside * (count - lower_count)) / total
        lower_bound, lower_count = bound, count
    return 1.0
