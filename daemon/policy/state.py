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
        blind_since: Since when the condition has had no data while a timer runs (pending's
            ``for``, a firing policy's ``keep_firing_for``), under ``on_no_data: hold``; None
            when it has data. Time unseen does not count toward a timer (:meth:`seeing`).
    """

    phase: Phase = Phase.INACTIVE
    since: float | None = None
    clearing_since: float | None = None
    last_action_at: float | None = None
    actions: tuple[float, ...] = ()
    blocked_by: str | None = None
    error: str | None = None
    blind_since: float | None = None

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

    def blind(self, now: float) -> PolicyState:
        """The state at a tick whose data is missing: a running timer stops counting at ``now``."""
        timing = self.phase is Phase.PENDING or (
            self.phase is Phase.FIRING and self.clearing_since is not None
        )
        if not timing or self.blind_since is not None:
            return self
        return replace(self, blind_since=now)

    def seeing(self, now: float, timer_s: float) -> PolicyState:
        """The state once data is back at ``now``: the unseen time is taken out of the timer.

        A condition is only known to have held for the time it was seen holding, so the timer
        (``since`` while pending, ``clearing_since`` while firing) moves on by the gap. A gap as
        long as the timer itself (``timer_s``: ``for`` or ``keep_firing_for``) starts it over.
        """
        if self.blind_since is None:
            return self
        gap = now - self.blind_since
        seen = replace(self, blind_since=None)
        if self.phase is Phase.PENDING and self.since is not None:
            return replace(seen, since=now if gap >= timer_s else self.since + gap)
        if self.phase is Phase.FIRING and self.clearing_since is not None:
            clearing = None if gap >= timer_s else self.clearing_since + gap
            return replace(seen, clearing_since=clearing)
        return seen

    def restarted(self, now: float) -> PolicyState:
        """The state a governor that starts again resumes from, at ``now``.

        It did not watch the time it was down, so that time counts toward no timer: a pending
        policy's ``for`` and a firing policy's ``keep_firing_for`` start over. Being firing,
        the last action and the hourly budget carry over as they were.
        """
        if self.phase is Phase.PENDING:
            return replace(self, since=now, blind_since=None)
        if self.phase is Phase.FIRING and self.clearing_since is not None:
            return replace(self, clearing_since=None, blind_since=None)
        return replace(self, blind_since=None)
