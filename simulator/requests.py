"""Requests as the simulated engine tracks them, and the record each one leaves behind.

Every request ends exactly once, with one :class:`Outcome`: completed (vLLM's finished
reason ``stop``), aborted (in flight when the engine shut down) or rejected (never admitted:
the engine was down or draining, a queue limit of the API server was reached, the request
can never fit in the KV cache, or it timed out in the queue of the gate in front).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    """How a request ended."""

    COMPLETED = "completed"
    ABORTED = "aborted"
    REJECTED = "rejected"


class RejectReason(StrEnum):
    """Why a request was never admitted.

    ``vllm:admission_rejections_total{reason}`` counts the first two; the others are what a
    client sees as a refused connection, an HTTP 400, or (``queue_timeout``) the 503 of the
    admission gate in front of vLLM (:mod:`simulator.gate`), which vLLM never sees.
    """

    MAX_NUM_QUEUED_REQS = "max_num_queued_reqs"
    MAX_NUM_QUEUED_TOKENS = "max_num_queued_tokens"
    UNAVAILABLE = "unavailable"
    TOO_LONG = "too_long"
    QUEUE_TIMEOUT = "queue_timeout"


@dataclass(eq=False, slots=True)
class Request:
    """One request inside the engine. Identity, not value, is what makes two requests equal.

    Progress follows vLLM's scheduler: ``computed`` tokens have KV in the cache, ``generated``
    output tokens have been sampled, and a request needs ``prompt_tokens + generated`` tokens
    computed before it samples the next one. While a request decodes, ``generated`` is the
    count at ``decode_anchor_step`` and advances by one every step after it (the scheduler
    derives the current count rather than touching every request every step).

    ``priority`` is the request's own field of vLLM's API (lower is served first, default 0);
    only a scheduler running ``--scheduling-policy priority`` looks at it. ``block_names`` are
    the chained names of its prompt's full blocks (:mod:`simulator.prefix_cache`), empty for a
    request that came as lengths only.
    """

    request_id: str
    arrived_at: float
    prompt_tokens: int
    max_tokens: int
    computed: int = 0
    generated: int = 0
    blocks: int = 0
    decoding: bool = False
    decode_anchor_step: int = 0
    running_seq: int = -1
    epoch: int = 0
    num_preemptions: int = 0
    first_scheduled_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    priority: int = 0
    block_names: tuple[int, ...] = ()

    @property
    def num_tokens(self) -> int:
        """Prompt plus the output sampled so far (valid while not decoding)."""
        return self.prompt_tokens + self.generated


@dataclass(frozen=True, slots=True)
class FinishedRequest:
    """What one request left behind; the latencies are None where they never happened.

    Attributes:
        request_id: The request's id.
        arrived_at: When it reached the server (s, driver clock).
        finished_at: When it completed, was aborted or was rejected.
        prompt_tokens: Prompt length.
        output_tokens: Output tokens it received.
        outcome: Completed, aborted or rejected.
        reject_reason: Why it was rejected, if it was.
        num_preemptions: How often it was preempted and recomputed.
        queue_time_s: Arrival to first scheduled.
        ttft_s: Arrival to first output token.
        tpot_s: (e2e - ttft) / (output_tokens - 1), for completed requests of 2+ tokens.
        prefill_time_s: First scheduled to first token.
        decode_time_s: First token to the end.
        e2e_s: Arrival to the end.
        priority: The request's priority (0 unless its client gave one).
    """

    request_id: str
    arrived_at: float
    finished_at: float
    prompt_tokens: int
    output_tokens: int
    outcome: Outcome
    reject_reason: RejectReason | None = None
    num_preemptions: int = 0
    queue_time_s: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    prefill_time_s: float | None = None
    decode_time_s: float | None = None
    e2e_s: float | None = None
    priority: int = 0

    @property
    def finished_reason(self) -> str | None:
        """The ``finished_reason`` label vLLM uses: ``stop``, ``abort``; None when rejected."""
        return {Outcome.COMPLETED: "stop", Outcome.ABORTED: "abort"}.get(self.outcome)


def finished_record(
    request: Request, now: float, outcome: Outcome, reject_reason: RejectReason | None = None
) -> FinishedRequest:
    """The record a request leaves when it ends at ``now`` (``generated`` must be current)."""
    first_token = request.first_token_at
    scheduled = request.first_scheduled_at
    ttft = None if first_token is None else first_token - request.arrived_at
    prefill = None
    if first_token is not None and scheduled is not None:
        prefill = first_token - scheduled
    tpot = None
    if outcome is Outcome.COMPLETED and ttft is not None and request.generated > 1:
        tpot = (now - request.arrived_at - ttft) / (request.generated - 1)
    return FinishedRequest(
        request_id=request.request_id,
        arrived_at=request.arrived_at,
        finished_at=now,
        prompt_tokens=request.prompt_tokens,
        output_tokens=request.generated,
        outcome=outcome,
        reject_reason=reject_reason,
        num_preemptions=request.num_preemptions,
        queue_time_s=None if scheduled is None else scheduled - request.arrived_at,
        ttft_s=ttft,
        tpot_s=tpot,
        prefill_time_s=prefill,
        decode_time_s=None if first_token is None else now - first_token,
        e2e_s=now - request.arrived_at,
        priority=request.priority,
    )
