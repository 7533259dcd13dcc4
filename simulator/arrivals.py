"""The unit every workload produces: one request arriving at one time."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Arrival:
    """One request of a workload.

    Attributes:
        arrived_at: Seconds from the start of the workload.
        prompt_tokens: Prompt length (``num_prefill_tokens`` in a trace).
        output_tokens: Tokens the request generates before it stops (``num_decode_tokens``).
        priority: vLLM's request ``priority`` (lower is served first); 0 is online traffic,
            a larger value the batch lane (:mod:`simulator.lanes`).
    """

    arrived_at: float
    prompt_tokens: int
    output_tokens: int
    priority: int = 0
