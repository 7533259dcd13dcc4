"""Gradient2: the delay-gradient limiter of Netflix's concurrency-limits.

From the class documentation of ``Gradient2Limit`` and the library's README
(github.com/Netflix/concurrency-limits) and the Netflix technology blog post "Performance Under
Load" (2018). Each window it compares a short-term latency (the window's own) with a long-term
exponential average of it, the baseline:

    gradient = max(0.5, min(1.0, tolerance * long / short))
    new      = estimate * gradient + queue_size
    estimate = estimate * (1 - smoothing) + new * smoothing     # then into [min, max]

so a latency above the baseline shrinks the limit (by at most half per window, to ignore
outliers) and a latency at or below it lets the limit grow by ``queue_size`` (smoothed). The
baseline follows slowly (an exponential average over ``long_window`` windows, a plain mean for
the first ``warmup`` windows), and decays faster (x0.9) while it is more than twice the
short-term latency, so that it comes back after a long overload. The limit does not move while
less than half of it is in flight (app-limited: no evidence either way).

Defaults are the library's: smoothing 0.2, queue size 4, a long window of 600 samples (here
windows, so 600 ticks), a warmup of 10. ``tolerance`` is the ``rttTolerance`` of its earlier
releases (how far above the baseline the latency may go before the limit shrinks); 1.0 is the
current formula. It reacts to latency only: drops are not an input of Gradient2.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from daemon.policy.admission.signals import (
    DEFAULT_WINDOW_S,
    AdmissionSignals,
    Step,
    check_controller,
    decide,
    hold,
    hold_without,
)


@dataclass(frozen=True, slots=True)
class Gradient2State:
    """The estimate and the baseline latency.

    Attributes:
        estimate: The limit as a real number (the gate holds it rounded down); None until the
            first tick, which starts from the cap in force.
        long_latency_s: The long-term average latency (None before the first sample).
        samples: Windows averaged so far, up to the warmup.
    """

    estimate: float | None = None
    long_latency_s: float | None = None
    samples: int = 0


@dataclass(frozen=True, slots=True)
class Gradient2:
    """The Gradient2 limiter.

    Attributes:
        min_cap: Lowest cap.
        max_cap: Highest cap (vLLM's max-num-seqs).
        window_s: The window of the signals it reads, in seconds.
        smoothing: Weight of the new estimate, 0-1.
        queue_size: Growth allowed per window while latency stays at the baseline.
        long_window: Windows of the long-term average.
        warmup: Windows averaged plainly before the exponential average starts.
        tolerance: Latency over baseline tolerated before the limit shrinks.
    """

    needs: ClassVar[tuple[str, ...]] = ("cap", "in_flight", "latency_s")

    min_cap: int
    max_cap: int
    smoothing: float = 0.2
    queue_size: float = 4.0
    long_window: int = 600
    warmup: int = 10
    tolerance: float = 1.0

    window_s: float = DEFAULT_WINDOW_S

    def __post_init__(self) -> None:
        check_controller(self.min_cap, self.max_cap, self.window_s)
        if not 0 < self.smoothing <= 1 or self.long_window < 1 or self.tolerance < 1:
            message = "gradient2 needs 0 < smoothing <= 1, long_window >= 1 and tolerance >= 1"
            raise ValueError(message)

    def initial_state(self) -> Gradient2State:
        """No estimate, no baseline yet."""
        return Gradient2State()

    def step(
        self, state: Gradient2State, signals: AdmissionSignals, now: float
    ) -> Step[Gradient2State]:
        """Update the baseline with the window's latency, then the estimate."""
        del now  # one sample per window, whenever it comes
        known = signals.known(self.needs)
        if known is None:
            return hold_without(state, signals.missing(self.needs))
        cap, short = known["cap"], known["latency_s"]
        if short <= 0:
            return hold(state, "no latency in the window")
        long = self._averaged(state, short)
        if long / short > 2:
            long *= 0.9  # recovering from a long overload: let the baseline catch up
        estimate = state.estimate if state.estimate is not None else cap
        state = replace(
            state, estimate=estimate, long_latency_s=long, samples=min(state.samples + 1, 1 << 30)
        )
        if known["in_flight"] < estimate / 2:
            return hold(state, "app-limited (less than half the limit in flight)")
        gradient = max(0.5, min(1.0, self.tolerance * long / short))
        new = estimate * gradient + self.queue_size
        new = estimate * (1 - self.smoothing) + new * self.smoothing
        new = max(float(self.min_cap), min(float(self.max_cap), new))
        state = replace(state, estimate=new)
        reason = f"latency {short:.3f} s vs baseline {long:.3f} s, gradient {gradient:.2f}"
        return decide(state, cap, new, reason, min_cap=self.min_cap, max_cap=self.max_cap)

    def _averaged(self, state: Gradient2State, sample: float) -> float:
        if state.long_latency_s is None or state.samples < self.warmup:
            count = state.samples + 1
            previous = state.long_latency_s or 0.0
            return previous + (sample - previous) / count
        factor = 2.0 / (self.long_window + 1)
        return state.long_latency_s * (1 - factor) + sample * factor
