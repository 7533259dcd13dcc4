"""The knobs a policy may change, what values they take, and which way is safer.

This is the policy language's view: names, types, bounds of meaning, and the *safer direction*
used when two policies want to move the same knob at once (fewer sequences, a smaller token
budget, quieter logs). Which flags a given vLLM version has, and how a change is applied, is the
actuators' business (a registry per version).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum


class Safer(Enum):
    """Which way a knob is safer to move when policies disagree."""

    LOWER = "lower"  # fewer concurrent sequences, smaller budgets, less logging
    HIGHER = "higher"


@dataclass(frozen=True, slots=True)
class Knob:
    """One tunable of a vLLM server.

    Attributes:
        name: The policy-facing name (vLLM's long option name with underscores).
        kind: ``int``, ``float`` or ``bool``; log levels are ints on the logging scale.
        safer: The direction that wins a conflict.
        restart_required: Whether changing it restarts vLLM (every knob in vLLM 0.33).
        meaning: One line for people.
    """

    name: str
    kind: type
    safer: Safer
    restart_required: bool
    meaning: str


LOG_LEVELS: Mapping[str, int] = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40}

KNOBS: Mapping[str, Knob] = {
    knob.name: knob
    for knob in [
        Knob("max_num_seqs", int, Safer.LOWER, True, "Most sequences in one batch"),
        Knob("max_num_batched_tokens", int, Safer.LOWER, True, "Token budget of one step"),
        Knob("max_num_active_seqs", int, Safer.LOWER, True, "Cap on running requests"),
        Knob(
            "prefill_schedule_interval",
            int,
            Safer.HIGHER,
            True,
            "Admit prefills every N steps (a batching window)",
        ),
        Knob("long_prefill_token_threshold", int, Safer.LOWER, True, "Cap on one prefill's chunk"),
        Knob("watermark", float, Safer.HIGHER, True, "Share of KV blocks kept free on admission"),
        # Log levels: higher numbers log less, which is what a full disk needs.
        Knob("log_level", int, Safer.HIGHER, True, "VLLM_LOGGING_LEVEL on the logging scale"),
        Knob("uvicorn_log_level", int, Safer.HIGHER, True, "--uvicorn-log-level, logging scale"),
        Knob("enable_log_requests", bool, Safer.LOWER, True, "--enable-log-requests"),
    ]
}
# --disable-log-stats is deliberately absent: it removes every vllm:* metric, blinding the
# governor. It cannot be named in a policy at all.
