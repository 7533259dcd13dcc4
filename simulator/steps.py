"""What one engine step computes and produces, and the counters steps add up to.

These are the records a driver reads: a real-time server turns them into vLLM's ``/metrics``
(``iteration_tokens_total``, ``inter_token_latency_seconds``, the counters), a virtual run into
its report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from simulator.requests import FinishedRequest, RejectReason


class StepPlan(NamedTuple):
    """What one engine step computes, decided when it starts (a tuple: one is made per step).

    Attributes:
        number: The step's number in this incarnation, from 1.
        started_at: When it started (s, driver clock).
        duration_s: How long it takes, from the profile.
        prefill_tokens: Prompt (or recomputed) tokens in the step.
        decode_tokens: Decoding sequences in the step, one token each.
        context_tokens: Summed KV context of the scheduled sequences.
        num_prefills: Sequences with a prefill chunk in the step.
    """

    number: int
    started_at: float
    duration_s: float
    prefill_tokens: int
    decode_tokens: int
    context_tokens: int
    num_prefills: int

    @property
    def ends_at(self) -> float:
        """When the step's tokens come out."""
        return self.started_at + self.duration_s


class StepResult(NamedTuple):
    """What one engine step produced.

    Attributes:
        plan: The step.
        generated_tokens: Output tokens sampled at its end.
        first_tokens: Requests that received their first token.
        finished: Requests that completed at its end.
        inter_token_latencies: (seconds, count) pairs, one observation per token that was
            not a request's first (``vllm:inter_token_latency_seconds``).
        ttfts: Time to first token of each request that received its first token, observed
            when the token comes out as vLLM does (``vllm:time_to_first_token_seconds``).
    """

    plan: StepPlan
    generated_tokens: int
    first_tokens: int
    finished: tuple[FinishedRequest, ...]
    inter_token_latencies: tuple[tuple[float, int], ...]
    ttfts: tuple[float, ...] = ()


@dataclass(slots=True)
class EngineCounters:
    """Cumulative counters of one incarnation, as vLLM's own ``/metrics`` would show them."""

    preemptions: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    steps: int = 0
    busy_s: float = 0.0
    finished: dict[str, int] = field(default_factory=lambda: {"stop": 0, "abort": 0})
    admission_rejections: dict[str, int] = field(
        default_factory=lambda: {reason.value: 0 for reason in RejectReason}
    )
