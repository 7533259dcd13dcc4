"""What the what-if knows of a workload: rate, burstiness and length distributions.

Frozen, picklable (it travels to the worker process) and JSON-ready (``whatif --json``, and
later the proposals that carry their counterfactual).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from daemon.whatif.lognormal_fit import LogNormal


@dataclass(frozen=True, slots=True)
class LengthSummary:
    """One length distribution (prompt or output tokens) over the window.

    Attributes:
        requests: Observations in the window (the histogram's ``_count`` increase).
        mean: Mean length (``_sum`` increase over ``_count`` increase).
        p50: Median, interpolated in the buckets as Prometheus' ``histogram_quantile`` does.
        p90: 90th percentile, likewise.
        p99: 99th percentile, likewise.
        fit: The log-normal fitted to the bucket counts, which synthesis draws from.
        max_tokens: Lengths are clamped to this: the top of the highest bucket seen.
    """

    requests: float
    mean: float
    p50: float
    p90: float
    p99: float
    fit: LogNormal
    max_tokens: int

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping, the fit as its median and p90."""
        shown = {key: _rounded(value) for key, value in asdict(self).items() if key != "fit"}
        return shown | {"fit": {"median": _rounded(self.fit.median), "p90": _rounded(self.fit.p90)}}


@dataclass(frozen=True, slots=True)
class GateDemand:
    """The demand at an admission gate over the window, in requests per second.

    Behind a gate vLLM sees only what the gate let in; the demand is that plus what the gate
    refused plus the growth of its queue. Refused and queued requests are assumed to be like
    the admitted ones (their lengths are never seen: vLLM's histograms observe only requests
    it served).

    Attributes:
        admitted_rps: Requests that reached vLLM (its own count of arrivals).
        refused_rps: The gate's own 503s (queue timeouts): its backend's 5xx less its servers'.
        queued_rps: Growth of the gate's queue over the window, per second (negative when it
            shrank).
        cap: The gate's cap (the server's ``maxconn``) at the end of the window, or None when
            it has none.
    """

    admitted_rps: float
    refused_rps: float
    queued_rps: float
    cap: int | None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            "admitted_rps": _rounded(self.admitted_rps),
            "refused_rps": _rounded(self.refused_rps),
            "queued_rps": _rounded(self.queued_rps),
            "gate_cap": self.cap,
        }


@dataclass(frozen=True, slots=True)
class WorkloadSummary:
    """The recent workload of one instance, as its own metrics tell it.

    Attributes:
        instance: The configured target.
        window_s: Seconds between the first and last scrape used.
        scrapes: Scrape intervals in the window.
        rate_rps: Arrivals per second: requests finished or refused, plus the growth of those
            running and waiting; behind a gate, plus what the gate refused and the growth of
            its queue (``gate``).
        count_cv: Coefficient of variation of the arrivals counted per scrape interval.
        arrival_cv: The inter-arrival CV a renewal process with these counts would have (the
            square root of the counts' variance over their mean), which synthesis uses.
        scrape_interval_s: Mean seconds between scrapes.
        prompt: Prompt lengths.
        output: Output lengths.
        gate: The demand at the instance's gate, or None without one (or without its data).
    """

    instance: str
    window_s: float
    scrapes: int
    rate_rps: float
    count_cv: float
    arrival_cv: float
    scrape_interval_s: float
    prompt: LengthSummary
    output: LengthSummary
    gate: GateDemand | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            "instance": self.instance,
            "window_s": _rounded(self.window_s),
            "scrapes": self.scrapes,
            "scrape_interval_s": _rounded(self.scrape_interval_s),
            "rate_rps": _rounded(self.rate_rps),
            "count_cv": _rounded(self.count_cv),
            "arrival_cv": _rounded(self.arrival_cv),
            "prompt_tokens": self.prompt.to_json(),
            "output_tokens": self.output.to_json(),
            "demand": None if self.gate is None else self.gate.to_json(),
        }


def _rounded(value: float) -> float:
    """Four significant digits: what a person or a diff needs of an estimate."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, max(0, 3 - math.floor(math.log10(abs(value)))))
