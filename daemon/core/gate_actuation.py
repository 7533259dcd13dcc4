"""The admission gate's knob, ``gate_cap``, as the one actuator protocol carries it.

The gate is a proxy in front of one vLLM instance (HAProxy); its cap (the server's
``maxconn``) is how many requests may be inside vLLM at once. Moving it is live and low risk:
no restart, no file, no dropped connection. The gate's actuator is an
:class:`~daemon.core.actuator_kinds.Actuator` like every other; what is particular to the gate
is declared here:

- the knob's name (:data:`GATE_CAP_KNOB`) and how a request for it reads: ``changes`` holds the
  cap, ``current`` the instance's ``max-num-seqs`` (:func:`cap_request`), whose envelope is
  ``[1, max-num-seqs]`` with any step (:func:`cap_envelope`);
- the port the engine lends the actuator for each gate (:class:`GateRuntime`, HAProxy's
  stats socket, looked up with a :data:`GateCapLookup`);
- the gate's own journal (:class:`CapJournal`), whose rows are :class:`CapResult`: it records
  changes, not ticks. A cap the controller holds, a refusal repeated every tick (a freeze), or
  a cap already in force is counted and logged by the engine, never a row.

An :class:`~daemon.core.actuation.ActuationResult` of the gate reads back as a
:class:`CapResult` (:meth:`CapResult.of`), the vocabulary of the journal, the metrics and
``status``. Actuators see this through :mod:`daemon.api` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from daemon.core.actuation import (
    DONE,
    DRY_RUN,
    FAILED,
    REFUSED,
    REVERTED,
    ActuationResult,
    ChangeRequest,
    JournalState,
)
from daemon.core.settings import Envelope, VllmInstance

GATE_CAP_KNOB = "gate_cap"  # the gate's one knob: how many requests may be inside vLLM
MAX_NUM_SEQS = "max_num_seqs"  # what bounds it, carried in a request's ``current``
NO_CHANGE = "no_change"  # the guard of a cap already in force: nothing was sent


class CapState(StrEnum):
    """How an attempt to move a gate's cap ended (a ``StrEnum``: stored rows stay valid)."""

    APPLIED = "applied"  # set and read back
    UNCHANGED = "unchanged"  # the gate already had that cap: nothing was sent
    REFUSED = "refused"  # preflight said no (bounds, freeze, dry run): nothing was sent
    REVERTED = "reverted"  # sent, not read back as asked, and set back to what it was
    FAILED = "failed"  # sent, and neither the new nor the old cap could be confirmed


# The members by their old names: what the gate's actuator and the engine import.
CAP_APPLIED = CapState.APPLIED
CAP_UNCHANGED = CapState.UNCHANGED
CAP_REFUSED = CapState.REFUSED
CAP_REVERTED = CapState.REVERTED
CAP_FAILED = CapState.FAILED
CAP_JOURNALED = (CAP_APPLIED, CAP_REVERTED, CAP_FAILED)  # the outcomes that are changes


def cap_request(target: str, policy: str, cap: int, max_cap: int, reason: str) -> ChangeRequest:
    """A cap the engine wants at one instance's gate, as the actuator protocol carries it.

    Args:
        target: The vLLM instance behind the gate.
        policy: The admission policy that decided it, or ``restore`` / ``clamp`` when the
            engine opens the gate back to ``max-num-seqs`` or closes it down to it.
        cap: The cap to set.
        max_cap: The instance's ``max-num-seqs`` now: no cap above it is ever set.
        reason: One line for people (the controller's reason).
    """
    return ChangeRequest(
        target=target,
        policy=policy,
        changes={GATE_CAP_KNOB: float(cap)},
        current={MAX_NUM_SEQS: float(max_cap)},
        reason=reason,
    )


def cap_envelope(max_cap: float) -> Envelope:
    """The gate's envelope: a cap of 1 to ``max-num-seqs``, in any step.

    Above ``max-num-seqs`` vLLM would queue the excess itself, with no bound on the wait; 0
    would mean no limit at all. The pace of the cap is its admission policy's ``interval_s``
    (the loop steps no faster), not a dwell time or an hourly budget: those pace restarts.
    """
    top = max(max_cap, 1.0)
    return Envelope(min=1.0, max=top, max_step=top, min_dwell_s=0.0)


@dataclass(frozen=True, slots=True)
class CapResult:
    """How a :class:`CapChange` ended.

    Attributes:
        target: The vLLM instance behind the gate.
        policy: As in the change.
        state: One of the ``CAP_*`` outcomes.
        before: The cap read from the gate before, None when unknown.
        after: The cap the gate holds now as last read, None when unknown.
        outcome: A sentence for people.
    """

    target: str
    policy: str
    state: CapState
    before: int | None
    after: int | None
    outcome: str

    def __post_init__(self) -> None:
        """Refuse a state that is not one, as the member it is."""
        object.__setattr__(self, "state", CapState(self.state))

    @classmethod
    def of(cls, result: ActuationResult) -> CapResult:
        """The gate's outcome, read back from what its actuator's ``apply`` returned."""
        refused = result.state in (REFUSED, DRY_RUN)
        unchanged = refused and any(guard == NO_CHANGE for guard, _ in result.refusals)
        if unchanged:
            state = CAP_UNCHANGED
        elif refused:
            state = CAP_REFUSED
        else:
            state = _CAP_STATE_OF[result.state]
        return cls(
            result.target,
            result.policy,
            state,
            _cap(result.plan.get("before")),
            _cap(result.plan.get("after")),
            result.outcome,
        )

    def actuation(
        self, *, cap: int, refusals: tuple[tuple[str, str], ...] = (), dry_run: bool = False
    ) -> ActuationResult:
        """This outcome as the actuator protocol returns it (:meth:`of` reads it back)."""
        state = DRY_RUN if dry_run else _JOURNAL_STATE_OF[self.state]
        return ActuationResult(
            target=self.target,
            policy=self.policy,
            state=state,
            outcome=self.outcome,
            changes={GATE_CAP_KNOB: float(cap)},
            plan={"knob": GATE_CAP_KNOB, "before": self.before, "asked": cap, "after": self.after},
            refusals=refusals,
        )


_JOURNAL_STATE_OF: dict[CapState, JournalState] = {
    CapState.APPLIED: DONE,
    CapState.UNCHANGED: REFUSED,
    CapState.REFUSED: REFUSED,
    CapState.REVERTED: REVERTED,
    CapState.FAILED: FAILED,
}
_CAP_STATE_OF: dict[JournalState, CapState] = {
    DONE: CapState.APPLIED,
    REVERTED: CapState.REVERTED,
    FAILED: CapState.FAILED,
}


def _cap(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) else None


class GateRuntime(Protocol):
    """One gate's runtime API, lent by the engine: read and set the cap, live."""

    @property
    def where(self) -> str:
        """The gate, for messages (``/run/haproxy/admin.sock vllm/main``)."""
        ...

    async def read_cap(self) -> int | None:
        """The cap in force; None when the server has none (no limit).

        Raises:
            GovernorError: The gate cannot be reached or refused (a SourceError).
        """
        ...

    async def write_cap(self, cap: int) -> int | None:
        """Set the cap live, then return it as read back.

        Raises:
            GovernorError: The gate cannot be reached or refused the command.
        """
        ...


class CapJournal(Protocol):
    """Where the engine keeps a durable row per cap change (applied, reverted, failed)."""

    def record(self, result: CapResult, reason: str) -> None:
        """Keep one change with the reason it was asked for."""
        ...


# The gate in front of an instance, or None where it has none.
GateCapLookup = Callable[[VllmInstance], GateRuntime | None]


def no_gate_caps(_instance: VllmInstance) -> GateRuntime | None:
    """The lookup of a governor without gates."""
    return None
