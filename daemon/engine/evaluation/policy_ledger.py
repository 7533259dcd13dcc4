"""What the policies remember between evaluations: their states, the knobs' histories, decisions.

One object, built before every stage that reads or writes it, so that none of them needs
another to exist first: the evaluator moves the states and reads the histories; the actuation
runner enters a restart into the histories (dwell, budgets) and records the alert of a revert;
the approvals' click-time re-check, the admission loop, ``status`` and ``explain`` read the
states; the tuner keeps the tuned changes awaiting their measurement. All of it is durable
through the :class:`StateStore`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from daemon.core.actuation import ActuationResult
from daemon.core.clock import Clock
from daemon.engine.storage.state_store import StateStore
from daemon.policy.decisions import Decision
from daemon.policy.planner import KnobHistory, KnobKey
from daemon.policy.state import PolicyState
from daemon.policy.tick import StateKey

if TYPE_CHECKING:
    from daemon.whatif.tuned_effects import Expected


class PolicyLedger:
    """Policy states, knob histories and the decision log, kept in memory and in the store."""

    def __init__(self, store: StateStore, clock: Clock) -> None:
        self.store = store
        self._clock = clock
        self.states: dict[StateKey, PolicyState] = {}
        self.history: dict[KnobKey, KnobHistory] = {}

    def restore(self) -> None:
        """Load what the previous run left (times are monotonic, so they are shifted)."""
        offset, now = self.offset(), self._clock.monotonic()
        # The time this governor was down was watched by no one: it counts toward no timer.
        self.states = {
            key: state.restarted(now) for key, state in self.store.load_states(offset).items()
        }
        self.history = self.store.load_history(offset)

    def keep_states(self, states: Mapping[StateKey, PolicyState]) -> None:
        """Make ``states`` current, saving those that changed."""
        changed = {key: state for key, state in states.items() if self.states.get(key) != state}
        if changed:
            self.store.save_states(changed, self.offset())
        self.states = dict(states)

    def record(self, decisions: Sequence[Decision]) -> None:
        """Add decisions to the log (a tick's, or one made outside a tick: a revert's alert)."""
        self.store.record(decisions, self.offset())

    def enter_applied(self, result: ActuationResult) -> None:
        """Enter a change that restarted a server in its knobs' histories (dwell, budgets)."""
        now, offset = self._clock.monotonic(), self.offset()
        for key, history in changed_histories(
            self.history, result.target, result.changes, now
        ).items():
            self.history[key] = history
            self.store.save_history(key, history, offset)

    def saved_effects(self) -> list[Expected]:
        """The tuned changes the previous run awaited, on this run's clock (as it left them)."""
        return self.store.load_effects(self.offset())

    def keep_effects(self, waiting: Sequence[Expected]) -> None:
        """Keep the tuned changes awaited now, for a governor that starts again."""
        self.store.save_effects(waiting, self.offset())

    def offset(self) -> float:
        """Wall-clock seconds minus monotonic seconds, now."""
        return self._clock.wall().timestamp() - self._clock.monotonic()


def changed_histories(
    history: Mapping[KnobKey, KnobHistory], target: str, knobs: Iterable[str], now: float
) -> dict[KnobKey, KnobHistory]:
    """The histories of ``target``'s ``knobs`` after a change applied at ``now``.

    What the daemon enters once a change has restarted the server; backtests enter would-have
    changes the same way.
    """
    return {
        (target, knob): history.get((target, knob), KnobHistory()).changed(now) for knob in knobs
    }
