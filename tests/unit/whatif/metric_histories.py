"""What a vLLM server's metrics would show for a list of arrivals, written straight to a store.

No engine: every request ends the moment it arrives, so the request counter counts arrivals
and the length histograms observe every one, at each scrape as vLLM 0.33 exposes them (1-2-5
buckets up to ``max_model_len``). Pure and fast, for property tests of the characterisation.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from daemon.sources.samples import Sample, SeriesKey
from daemon.sources.store import SignalStore
from simulator.arrivals import Arrival
from simulator.server.histograms import one_two_five_buckets

INSTANCE = "main"
BOUNDS = one_two_five_buckets(131_072)


def _key(name: str, **labels: str) -> SeriesKey:
    return SeriesKey(name, tuple(sorted({"instance": INSTANCE, **labels}.items())))


def history(
    arrivals: Sequence[Arrival],
    duration_s: float,
    *,
    interval_s: float = 2.0,
    restart_at: float | None = None,
) -> SignalStore:
    """The store after scraping every ``interval_s``; counters restart at ``restart_at``."""
    store = SignalStore(points_per_series=8192)
    at, index = 0.0, 0
    totals = _Totals()
    while at < duration_s:
        at += interval_s
        if restart_at is not None and at - interval_s < restart_at <= at:
            totals = _Totals()
        while index < len(arrivals) and arrivals[index].arrived_at <= at:
            totals.observe(arrivals[index])
            index += 1
        store.add(totals.samples(at))
    return store


class _Totals:
    def __init__(self) -> None:
        self.requests = 0
        self.buckets = {"prompt": [0] * (len(BOUNDS) + 1), "generation": [0] * (len(BOUNDS) + 1)}
        self.sums = {"prompt": 0, "generation": 0}

    def observe(self, arrival: Arrival) -> None:
        self.requests += 1
        for kind, length in (
            ("prompt", arrival.prompt_tokens),
            ("generation", arrival.output_tokens),
        ):
            self.buckets[kind][bisect.bisect_left(BOUNDS, length)] += 1
            self.sums[kind] += length

    def samples(self, at: float) -> list[Sample]:
        source = f"vllm/{INSTANCE}"
        out = [
            Sample(
                _key("vllm_request_success_total", finished_reason="stop"),
                self.requests,
                at,
                source,
            ),
            Sample(_key("vllm_num_requests_running"), 0.0, at, source),
            Sample(_key("vllm_num_requests_waiting"), 0.0, at, source),
        ]
        for kind in ("prompt", "generation"):
            name = f"vllm_request_{kind}_tokens"
            running = 0
            for bound, count in zip((*BOUNDS, float("inf")), self.buckets[kind], strict=True):
                running += count
                le = "+Inf" if bound == float("inf") else repr(bound)
                out.append(Sample(_key(f"{name}_bucket", le=le), running, at, source))
            out.append(Sample(_key(f"{name}_count"), self.requests, at, source))
            out.append(Sample(_key(f"{name}_sum"), self.sums[kind], at, source))
        return out
