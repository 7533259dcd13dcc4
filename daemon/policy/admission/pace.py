"""Whether a cut only throttled vLLM: it did less work while the gate turned requests away.

A cut that relieves an overload trades requests refused at the gate for requests served in
time, and vLLM keeps about the same pace on fewer at once. A cut on a server with room to
spare makes it serve fewer requests and generate fewer tokens, and every request the gate
turns away is one the server alone might have served in time: clumps of chat that a 70B
serves at 89.6% alone were cut to 6 and refused a third of the requests.

Both measures must fall. A change of traffic moves one without the other: when long answers
give way to code completions, a server generates a third of the tokens (4,286 -> 1,318 a
second on the 8B's shifting day) while it admits more requests. Neither alone tells
throttling from a new mix.
"""

from __future__ import annotations

from dataclasses import dataclass

from daemon.policy.admission.signals import AdmissionSignals


@dataclass(frozen=True, slots=True)
class Pace:
    """How fast vLLM works over a window.

    Attributes:
        tokens_per_s: Tokens it generated per second.
        requests_per_s: Requests the gate let through to it per second.
    """

    tokens_per_s: float
    requests_per_s: float

    @classmethod
    def of(cls, signals: AdmissionSignals) -> Pace | None:
        """The pace the signals show, or None when either measure is missing."""
        tokens, requests = signals.gen_tokens_per_s, signals.gate_admitted_per_s
        if tokens is None or requests is None:
            return None
        return cls(tokens, requests)

    def throttled_from(self, before: Pace, max_loss: float) -> bool:
        """Whether both measures fell by more than ``max_loss`` (a share) since ``before``."""
        keep = 1.0 - max_loss
        return (
            self.tokens_per_s < keep * before.tokens_per_s
            and self.requests_per_s < keep * before.requests_per_s
        )
