"""Retry delays: exponential growth with jitter, so that many governors do not retry in step.

Each delay is drawn uniformly from the upper half of the exponential bound ("equal jitter"):
never near zero, so a broken far end is not hammered, and spread enough to de-synchronise a
fleet that lost the same broker at the same moment.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Delays for consecutive failures: ``base * 2**n``, capped, with jitter.

    Attributes:
        base_s: Bound of the first delay.
        cap_s: Largest bound.
        rng: Random source; inject a seeded one in tests.
    """

    base_s: float = 1.0
    cap_s: float = 60.0
    rng: random.Random = field(default_factory=random.Random)
    failures: int = 0

    def next_delay(self) -> float:
        """The delay before the next attempt, counting one more failure."""
        bound = min(self.cap_s, self.base_s * 2 ** min(self.failures, 32))
        self.failures += 1
        return self.rng.uniform(bound / 2, bound)

    def reset(self) -> None:
        """Forget past failures after a success."""
        self.failures = 0
