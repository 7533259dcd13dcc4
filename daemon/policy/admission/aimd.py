"""AIMD: additive increase, multiplicative decrease, the loss-based baseline.

From Chiu and Jain, "Analysis of the Increase and Decrease Algorithms for Congestion Avoidance
in Computer Networks" (1989), as Netflix's concurrency-limits describes its ``AIMDLimit``
(github.com/Netflix/concurrency-limits, README and class documentation): on a drop, or a
latency above a timeout, the limit is multiplied by a backoff ratio (0.9 by default, kept in
[0.5, 1)) and falls by at least one; otherwise, when the limit is in use (at least half of it
in flight), it grows by one.

On these signals (see :mod:`~daemon.policy.admission.signals`) a drop is a preemption or a
request vLLM refused or failed during the window, and the timeout is the TTFT SLO (2 s). It
reads the cap in force from the gate each tick, so it has no state of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from daemon.policy.admission.signals import (
    DEFAULT_WINDOW_S,
    DROP_AND_LATENCY_NEEDS,
    AdmissionSignals,
    Step,
    check_controller,
    decide,
    dropped,
    hold,
    hold_without,
)


@dataclass(frozen=True, slots=True)
class AimdState:
    """AIMD keeps nothing between ticks: the gate holds its limit."""


@dataclass(frozen=True, slots=True)
class Aimd:
    """The AIMD limiter.

    Attributes:
        min_cap: Lowest cap.
        max_cap: Highest cap (vLLM's max-num-seqs).
        window_s: The window of the signals it reads, in seconds.
        backoff_ratio: Multiplier on a drop, in [0.5, 1).
        timeout_s: A latency above this counts as a drop (the TTFT SLO).
    """

    needs: ClassVar[tuple[str, ...]] = DROP_AND_LATENCY_NEEDS

    min_cap: int
    max_cap: int
    backoff_ratio: float = 0.9
    timeout_s: float = 2.0

    window_s: float = DEFAULT_WINDOW_S

    def __post_init__(self) -> None:
        check_controller(self.min_cap, self.max_cap, self.window_s)
        if not 0.5 <= self.backoff_ratio < 1.0:
            message = f"backoff_ratio must be in [0.5, 1), not {self.backoff_ratio}"
            raise ValueError(message)

    def initial_state(self) -> AimdState:
        """Nothing to remember."""
        return AimdState()

    def step(self, state: AimdState, signals: AdmissionSignals, now: float) -> Step[AimdState]:
        """Back off on a drop, grow by one while the limit is in use, else hold."""
        del now  # AIMD reacts to each window alone
        known = signals.known(self.needs)
        if known is None:
            return hold_without(state, signals.missing(self.needs))
        cap, in_flight = known["cap"], known["in_flight"]
        drop = dropped(known)
        if drop or known["latency_s"] > self.timeout_s:
            target = max(1.0, min(cap - 1, math.floor(cap * self.backoff_ratio)))
            why = "drop (preemptions or vLLM errors)" if drop else f"latency > {self.timeout_s} s"
            return decide(state, cap, target, why, min_cap=self.min_cap, max_cap=self.max_cap)
        if in_flight * 2 >= cap:
            return decide(
                state,
                cap,
                cap + 1,
                "no drop, limit in use",
                min_cap=self.min_cap,
                max_cap=self.max_cap,
            )
        return hold(state, "app-limited (less than half the limit in flight)")
