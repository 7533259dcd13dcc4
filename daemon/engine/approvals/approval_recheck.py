"""The world at click time: what the state machine's :class:`Recheck` is built from.

Everything is read when the click is judged, never cached from when the proposal was made:

* the condition: the policy still fires on the target (its state in the evaluator), or its
  ``when`` holds on the latest view of fresh signals; None when fresh data cannot tell;
* the knob values, from the server's files (the actuator reads them);
* a newer pending proposal for the same instance and knob;
* a freeze file in force;
* a veto: a firing policy that forbids moving the knob this way, or a quarantine of the
  proposing policy on that server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from daemon.approvals.proposal import Proposal
from daemon.core.knobs import KNOBS, Safer
from daemon.policy.evaluate import TargetView
from daemon.policy.expressions import ExpressionError
from daemon.policy.spec import PolicySpec
from daemon.policy.state import Phase, PolicyState
from daemon.policy.tick import StateKey

_HOLDING = frozenset({Phase.FIRING, Phase.PENDING})


class Lens(Protocol):
    """What the approvals ask of the policies at click time (tests substitute their own)."""

    def condition_holds(self, policy: str, target: str) -> bool | None:
        """Whether ``policy``'s condition holds on ``target`` now (None: cannot tell)."""
        ...

    def veto(self, proposal: Proposal) -> str | None:
        """The firing policy that forbids one of the proposal's moves now, if any."""
        ...


@dataclass(frozen=True, slots=True)
class PolicyLens:
    """Read-only access to the policies in force, their states and the latest views."""

    specs: Callable[[], tuple[PolicySpec, ...]]
    states: Callable[[], Mapping[StateKey, PolicyState]]
    views: Callable[[], Mapping[str, TargetView]]

    def condition_holds(self, policy: str, target: str) -> bool | None:
        """Whether ``policy``'s condition holds on ``target`` now (None: cannot tell)."""
        spec = next((s for s in self.specs() if s.name == policy), None)
        if spec is None:
            return False  # the policy was removed: nobody wants its change any more
        state = self.states().get((policy, target))
        if state is not None and state.phase in _HOLDING:
            return True
        view = self.views().get(target)
        if view is None:
            return None
        available = {n: view.signals[n] for n in spec.when.signals if n in view.signals}
        try:
            return bool(spec.when.evaluate(available))
        except ExpressionError:
            return None  # a signal it needs has no fresh data

    def veto(self, proposal: Proposal) -> str | None:
        """The firing policy that forbids one of the proposal's moves now, if any."""
        states = self.states()
        for spec in self.specs():
            if spec.action is None or not spec.action.vetoes:
                continue
            state = states.get((spec.name, proposal.instance))
            if state is None or state.phase is not Phase.FIRING:
                continue
            for move in proposal.moves:
                if move.knob in spec.action.vetoes and not _safer(move.knob, move.new, move.old):
                    return spec.name
        return None


def _safer(knob: str, new: float, old: float) -> bool:
    known = KNOBS.get(knob)
    if known is None:
        return False
    return new < old if known.safer is Safer.LOWER else new > old
