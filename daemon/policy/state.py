"""Runtime state of one policy on one target, kept apart from its immutable spec.

Everything the governor needs to resume correctly after a restart lives here (and is persisted
by the engine): when the condition started to hold, whether the policy fires, when it last
acted, its actions of the last hour, and the guard that last blocked it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

HOUR_S = 3600.0


class Phase(Enum):
    """Where a policy stands on a target."""

    INACTIVE = "inactive"  # the condition does not hold
    PENDING = "pending"  # it holds, but not yet for `for`
    FIRING = "firing"  # it held for `for`; stays until `clear` holds for `keep_firing_for`


@dataclass(frozen=True, slots=True)
class PolicyState:
    """State of one (policy, target) pair; times are on the loop's monotonic clock.

    Attributes:
        phase: Inactive, pending or firing.
        since: When the current phase began.
        clearing_since: While firing, since when the exit condition has held (None: it does not).
        last_action_at: When the policy last acted (or proposed) on this target.
        actions: Times of its actions within the last hour, for the hourly budget.
        blocked_by: The guard that blocked its last attempt, so a block is recorded once.
        error: Why its condition failed to evaluate at the last tick (None: it did not). Not
            persisted: the first tick after a restart finds it again.
    """

    phase: Phase = Phase.INACTIVE
    since: float | None = None
    clearing_since: float | None = None
    last_action_at: float | None = None
    actions: tuple[float, ...] = ()
    blocked_by: str | None = None
    error: str | None = None

    def acted(self, now: float) -> PolicyState:
        """The state after the policy's change was accepted (or proposed) at ``now``."""
        recent = tuple(at for at in self.actions if now - at < HOUR_S)
        return replace(self, last_action_at=now, actions=(*recent, now), blocked_by=None)

    def blocked(self, guard: str) -> PolicyState:
        """The state after an attempt was blocked by ``guard``."""
        return replace(self, blocked_by=guard)

    def actions_in_last_hour(self, now: float) -> int:
        """How many times it acted within the hour before ``now``."""
        return sum(1 for at in self.actions if now - at < HOUR_S)
