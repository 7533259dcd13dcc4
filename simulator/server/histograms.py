"""Histograms that take many equal observations at once, and vLLM 0.33's default buckets.

One engine step gives every decoding sequence a token after the same interval, so a step at
1024 sequences is 1024 identical inter-token latencies. prometheus-client's ``Histogram``
observes one value per call under a lock; here one call adds them all, which keeps a
saturated server's bookkeeping independent of its batch size.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

# Bucket bounds of vLLM 0.33.0 (vllm/v1/metrics/loggers.py; docs/sources.md#metrics).
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
TOKEN_LATENCY_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
ITERATION_TOKENS_BUCKETS = (
    1.0,
    8.0,
    16.0,
    32.0,
    64.0,
    128.0,
    256.0,
    512.0,
    1024.0,
    2048.0,
    4096.0,
    8192.0,
    16384.0,
)


def one_two_five_buckets(max_value: int) -> tuple[float, ...]:
    """The 1-2-5 bounds of vLLM's ``build_1_2_5_buckets``: 1, 2, 5, 10... up to ``max_value``.

    The bounds of the per-request token histograms (``request_prompt_tokens``,
    ``request_generation_tokens``), with ``max_model_len`` as ``max_value``.
    """
    bounds: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(bounds)
            bounds.append(float(value))
        exponent += 1


class WeightedHistogram:
    """A cumulative Prometheus histogram that can observe one value ``count`` times at once.

    Args:
        bounds: Upper bounds of the finite buckets, ascending; ``+Inf`` is implied.
    """

    __slots__ = ("_bounds", "_counts", "count", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self._bounds = tuple(bounds)
        self._counts = [0] * (len(self._bounds) + 1)
        self.count = 0
        self.total = 0.0

    def observe(self, value: float, count: int = 1) -> None:
        """Add ``count`` observations of ``value`` (a bucket holds values <= its bound)."""
        self._counts[bisect_left(self._bounds, value)] += count
        self.count += count
        self.total += value * count

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative ``(le, count)`` pairs as the text format spells them, ``+Inf`` last."""
        pairs: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip(self._bounds, self._counts, strict=False):
            running += count
            # repr() spells a bound as the text format does: 0.001, 1.0, 2560.0.
            pairs.append((repr(float(bound)), float(running)))
        pairs.append(("+Inf", float(running + self._counts[-1])))
        return pairs
