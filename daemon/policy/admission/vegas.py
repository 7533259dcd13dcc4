"""Vegas: the delay-based limiter after TCP Vegas.

From Brakmo and Peterson, "TCP Vegas: End to End Congestion Avoidance on a Global Internet"
(IEEE JSAC, 1995), as Netflix's concurrency-limits describes its ``VegasLimit``
(github.com/Netflix/concurrency-limits, README and class documentation). The queue the limit
builds inside the server is estimated from the no-load latency (the lowest seen):

    queue = ceil(limit * (1 - no_load / latency))

and, with ``L = max(1, floor(log10(limit)))`` (the square root of the limit from 1000 on):
a drop cuts the limit by ``L``; otherwise, while at least half the limit is in flight, a queue
of at most ``L`` grows it by ``6 L`` (nothing queues: probe fast), below ``3 L`` by ``L``, above
``6 L`` shrinks it by ``L``, and in between it holds. A latency below the no-load one replaces
it (and the window holds). Every ``probe_multiplier * limit`` windows the no-load latency is
reset to the current one, so that it can follow a server that got slower for good; the
library jitters that period (x0.5-1) to de-synchronise many clients, and one gate per
instance needs no jitter, so the period here is its mean (x0.75), which keeps ``step`` pure.

On these signals a drop is a preemption or a request vLLM refused or failed in the window.
Smoothing defaults to 1 (none), as in the library.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
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

_PROBE_JITTER = 0.75


@dataclass(frozen=True, slots=True)
class VegasState:
    """The estimate and the no-load latency.

    Attributes:
        estimate: The limit as a real number; None until the first tick (starts at the cap).
        no_load_s: The lowest latency seen since the last probe.
        windows_since_probe: Windows counted towards the next probe.
    """

    estimate: float | None = None
    no_load_s: float | None = None
    windows_since_probe: int = 0


@dataclass(frozen=True, slots=True)
class Vegas:
    """The Vegas limiter.

    Attributes:
        min_cap: Lowest cap.
        max_cap: Highest cap (vLLM's max-num-seqs).
        window_s: The window of the signals it reads, in seconds.
        smoothing: Weight of the new estimate, 0-1 (1: none).
        probe_multiplier: Probe the no-load latency every this many limits' worth of windows.
    """

    needs: ClassVar[tuple[str, ...]] = DROP_AND_LATENCY_NEEDS

    min_cap: int
    max_cap: int
    smoothing: float = 1.0
    probe_multiplier: int = 30

    window_s: float = DEFAULT_WINDOW_S

    def __post_init__(self) -> None:
        check_controller(self.min_cap, self.max_cap, self.window_s)
        if not 0 < self.smoothing <= 1 or self.probe_multiplier < 1:
            message = "vegas needs 0 < smoothing <= 1 and probe_multiplier >= 1"
            raise ValueError(message)

    def initial_state(self) -> VegasState:
        """No estimate, no no-load latency yet."""
        return VegasState()

    def step(self, state: VegasState, signals: AdmissionSignals, now: float) -> Step[VegasState]:
        """Probe or learn the no-load latency, else move the limit by the estimated queue."""
        del now  # one sample per window, whenever it comes
        known = signals.known(self.needs)
        if known is None:
            return hold_without(state, signals.missing(self.needs))
        cap, latency = known["cap"], known["latency_s"]
        if latency <= 0:
            return hold(state, "no latency in the window")
        estimate = state.estimate if state.estimate is not None else cap
        windows = state.windows_since_probe + 1
        if _PROBE_JITTER * self.probe_multiplier * estimate <= windows:
            probed = VegasState(estimate, latency, 0)
            return hold(probed, f"probe: no-load latency reset to {latency:.3f} s")
        no_load = state.no_load_s
        if no_load is None or latency < no_load:
            learned = VegasState(estimate, latency, windows)
            return hold(learned, f"new no-load latency {latency:.3f} s")
        state = replace(state, estimate=estimate, windows_since_probe=windows)
        queue = math.ceil(estimate * (1 - no_load / latency))
        new, why = self._target(estimate, queue, dropped(known), known["in_flight"])
        if new is None:
            return hold(state, why)
        new = max(1.0, min(float(self.max_cap), new))
        new = (1 - self.smoothing) * estimate + self.smoothing * new
        new = max(float(self.min_cap), new)
        state = replace(state, estimate=new)
        return decide(state, cap, new, why, min_cap=self.min_cap, max_cap=self.max_cap)

    @staticmethod
    def _target(
        estimate: float, queue: int, dropped: bool, in_flight: float
    ) -> tuple[float | None, str]:
        """The new estimate and why; None (hold) inside the sweet spot or when app-limited."""
        step = _log10_root(estimate)
        alpha, beta = 3 * step, 6 * step
        if dropped:
            return estimate - step, "drop (preemptions or vLLM errors)"
        if in_flight * 2 < estimate:
            return None, "app-limited (less than half the limit in flight)"
        if queue <= step:
            return estimate + beta, f"queue {queue}: nothing waits, probe up"
        if queue < alpha:
            return estimate + step, f"queue {queue} < alpha {alpha}"
        if queue > beta:
            return estimate - step, f"queue {queue} > beta {beta}"
        return None, f"queue {queue} between alpha {alpha} and beta {beta}"


def _log10_root(limit: float) -> int:
    """The library's step: ``max(1, floor(log10(limit)))`` below 1000, ``floor(sqrt)`` above."""
    whole = int(limit)
    if whole < 1000:
        return max(1, int(math.log10(whole))) if whole >= 1 else 1
    return math.isqrt(whole)
