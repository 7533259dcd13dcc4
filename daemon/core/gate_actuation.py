"""The contract between the engine's admission loop and the actuator of an admission gate.

The gate is a proxy in front of one vLLM instance (HAProxy); its cap (the server's
``maxconn``) is how many requests may be inside vLLM at once. Moving it is live and low risk:
no restart, no file, no dropped connection. The engine decides a cap (a :class:`CapChange`,
bounded by the instance's ``max-num-seqs``), lends the actuator the gate's runtime
(:class:`GateRuntime`, HAProxy's stats socket) and a :class:`CapJournal`, and gets a
:class:`CapResult` back. Actuators see this through :mod:`daemon.api` only.

The journal records changes, not ticks: a cap the controller holds, a refusal repeated every
tick (a freeze), or a cap already in force is counted and logged by the engine, never a row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from daemon.core.clock import Clock
from daemon.core.freeze_sources import FreezeSource
from daemon.core.settings import VllmInstance


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


@dataclass(frozen=True, slots=True)
class CapChange:
    """A cap the engine wants at one instance's gate.

    Attributes:
        target: The vLLM instance behind the gate.
        policy: The admission policy that decided it, or ``restore`` / ``clamp`` when the
            engine opens the gate back to ``max-num-seqs`` or closes it down to it.
        cap: The cap to set.
        max_cap: The instance's ``max-num-seqs`` now: no cap above it is ever set.
        reason: One line for people (the controller's reason).
    """

    target: str
    policy: str
    cap: int
    max_cap: int
    reason: str


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


class GateActuator(Protocol):
    """What the engine needs of the gate's actuator."""

    async def set_cap(
        self, instance: VllmInstance, gate: GateRuntime, change: CapChange
    ) -> CapResult:
        """Check, set, verify and (when the gate did not take it) revert one cap change."""
        ...


# journal, clock, freeze directory (the governor's state directory), the fleet's freeze (a
# cap is a live change: only a freeze in force holds it) -> the actuator.
GateActuatorFactory = Callable[[CapJournal, Clock, Path, FreezeSource], GateActuator]
