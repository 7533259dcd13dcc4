"""Online signals: vLLM's own, with the governor's batch traffic taken out.

vLLM counts a batch request like any other, so while the batch lane is open, ``running``,
``waiting`` and the token rates would read busier than the online traffic the policies guard,
and a window policy would close the lane on its own load. Where views are built, the
governor's own traffic on the target (:class:`~daemon.batch.own_traffic.OwnTraffic`) is taken
out, and added as the ``batch_*`` signals:

- ``waiting`` and ``running``: the batch requests in flight are counted as waiting first (under
  priority scheduling they are the ones that wait; under fcfs the lane is closed while anything
  waits, so they are running), and the rest as running; each is taken out of its gauge, never
  below 0.
- ``gen_tokens_per_s``, ``prompt_tokens_per_s``: the batch answers' tokens per second over the
  same window, taken out, never below 0.
- A signal without a fresh value stays without one: no data is never turned into a number.

Not separated: latency quantiles (``ttft_p95_s``...), ``kv_usage`` and the error rates. vLLM's
histograms do not say whose request an observation was, and batch requests are not streamed,
so the governor does not see their time to first token; with priority scheduling, waiting
batch requests lengthen vLLM's TTFT and queue-time quantiles, not online ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from daemon.batch.own_traffic import OwnTraffic
from daemon.sources.own_signals import (
    BATCH_GEN_TOKENS_PER_S,
    BATCH_IN_FLIGHT,
    BATCH_PIECE_TOKENS,
    BATCH_PROMPT_TOKENS_PER_S,
    BATCH_REQUESTS_PER_S,
)


def online_signals(signals: Mapping[str, Any], own: OwnTraffic) -> dict[str, Any]:
    """``signals`` with ``own`` taken out of vLLM's counts, and the ``batch_*`` signals added."""
    result = dict(signals)
    left = float(own.in_flight)
    for gauge in ("waiting", "running"):
        value = signals.get(gauge)
        if isinstance(value, int | float):
            taken = min(float(value), left)
            result[gauge] = float(value) - taken
            left -= taken
    for rate, ours in (
        ("gen_tokens_per_s", own.gen_tokens_per_s),
        ("prompt_tokens_per_s", own.prompt_tokens_per_s),
    ):
        value = signals.get(rate)
        if isinstance(value, int | float):
            result[rate] = max(0.0, float(value) - ours)
    result[BATCH_IN_FLIGHT] = float(own.in_flight)
    result[BATCH_REQUESTS_PER_S] = own.requests_per_s
    result[BATCH_PROMPT_TOKENS_PER_S] = own.prompt_tokens_per_s
    result[BATCH_GEN_TOKENS_PER_S] = own.gen_tokens_per_s
    result[BATCH_PIECE_TOKENS] = float(own.piece_tokens)
    return result
