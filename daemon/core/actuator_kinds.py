"""One actuator protocol, and the kinds of actuator the engine can drive, declared in one table.

Every actuator that carries out policy intents speaks :class:`Actuator`: what it knows of a
target's knobs now, a fresh look at them, apply (with a dry run), and reconcile what a
previous governor left open. What differs between kinds is *declared*, not coded in the
engine: an :class:`ActuatorKind` names its settings section and the targets it changes there,
its factory (built from the :class:`ActuatorServices` the engine lends), its
:class:`Capabilities`, the knobs and operations it takes, and how often its knobs are read.
The engine routes each intent to the kind that owns its target and runs one runner per kind.

A new actuator is therefore one module (the actuator) and one entry in the table the
application hands the governor (``actuators/kinds.py``). The admission gate is a kind like the
others (its knob ``gate_cap``, live, :mod:`daemon.core.gate_actuation`); what sets it apart is
declared too: it is not *routed* (policies' intents never reach it), because the engine's
admission loop moves its cap every few seconds, through the same ``apply``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from daemon.core.actuation import ActuationJournal, ActuationResult, ChangeRequest, SignalWindows
from daemon.core.batch_hold import BatchHold, no_batch_hold
from daemon.core.clock import Clock
from daemon.core.freeze_sources import NO_FREEZE_SOURCE, FreezeSource
from daemon.core.gate_actuation import CapJournal, GateCapLookup, no_gate_caps
from daemon.core.gate_drain import GateLookup
from daemon.core.restart_slots import NO_RESTART_SLOTS, RestartSlots
from daemon.core.settings import GovernorConfig


class Target(Protocol):
    """Something a policy names: a vLLM instance, a service with a log level..."""

    @property
    def name(self) -> str:
        """The target's name, unique across every section of ``config.toml``."""
        ...


TargetT = TypeVar("TargetT", bound=Target)
TargetT_contra = TypeVar("TargetT_contra", bound=Target, contravariant=True)


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What changes of a kind are like, which the engine and people rely on.

    Attributes:
        live: A change takes effect without restarting anything. A kind that is not live is
            restart-required: its changes cost capacity, so they may need a person's approval;
            a live change is undone as easily as it is made, so it runs with risk ``auto``.
        journals: Every change is kept in a journal (write-ahead where it can be left open),
            so a governor that dies mid-change finishes it on its next start.
        revertible: A change that fails its check is set back to what was in force, and its
            policy quarantined on that target.
    """

    live: bool
    journals: bool
    revertible: bool

    @property
    def restart_required(self) -> bool:
        """Whether a change restarts the target (the opposite of :attr:`live`)."""
        return not self.live


class Actuator(Protocol[TargetT_contra]):
    """What the engine needs of every actuator that carries out policy intents."""

    def current_knobs(self, target: TargetT_contra) -> Mapping[str, float]:
        """The knob values in force as known now, without waiting (empty: unknown)."""
        ...

    async def refresh(self, target: TargetT_contra) -> None:
        """Look at the target again, so that :meth:`current_knobs` says what is in force.

        The engine calls it every poll interval of a kind that declares one; a kind whose
        knobs are read from local files at each :meth:`current_knobs` has nothing to do here.
        """
        ...

    async def apply(
        self, target: TargetT_contra, request: ChangeRequest, *, dry_run: bool = False
    ) -> ActuationResult:
        """Check, change, verify, and set back on failure; journal every step."""
        ...

    async def reconcile(self, target: TargetT_contra) -> ActuationResult | None:
        """Finish a change a previous governor left open; None when there is none."""
        ...


@dataclass(frozen=True, slots=True)
class ActuatorServices:
    """What the engine lends every actuator it builds.

    Attributes:
        journal: The write-ahead journal and audit of changes.
        windows: The signal store over a window, for verification.
        clock: The injected clock.
        freeze_dir: Where freeze files are looked for (the governor's state directory).
        gates: The admission gate in front of a vLLM instance, if any (drained on a restart).
        batches: Closes a target's batch lane and waits for its requests (before a restart).
        fleet_freeze: The fleet's freeze (etcd), for the preflight of every change; none alone.
        restart_slots: The fleet's disruption budget, a slot taken before a restart; none alone.
        caps: The admission gates' journal of cap changes (None: a governor without one).
        gate_caps: The admission gate in front of a vLLM instance, if any (its cap).
    """

    journal: ActuationJournal
    windows: SignalWindows
    clock: Clock
    freeze_dir: Path
    gates: GateLookup
    batches: BatchHold = no_batch_hold
    fleet_freeze: FreezeSource = NO_FREEZE_SOURCE
    restart_slots: RestartSlots = NO_RESTART_SLOTS
    caps: CapJournal | None = None
    gate_caps: GateCapLookup = no_gate_caps


@dataclass(frozen=True, slots=True)
class ActuatorKind(Generic[TargetT]):
    """One kind of actuator, as the engine looks it up.

    Attributes:
        name: The kind's name (``vllm``, ``http_log_level``).
        section: Its settings section in ``config.toml`` (``[[vllm]]``), for people.
        title: How messages name its targets and actuator (``vLLM``, ``live log-level``).
        task: How its eternal tasks are named: ``{task} runner`` and ``{task} reader``.
        targets: The targets it changes in the configuration in force, in file order.
        factory: Builds the actuator from what the engine lends.
        capabilities: What its changes are like.
        knobs: The only knobs it takes; None when its own preflight decides which.
        operations: The named operations it runs besides knob values (``restart``).
        poll_interval_s: A target -> how often the engine refreshes its knobs; None when
            :meth:`Actuator.current_knobs` reads them itself.
        routed: Whether policies' intents are routed to it. The admission gate's is not: the
            engine's admission loop moves its cap, through the same :meth:`Actuator.apply`.
    """

    name: str
    section: str
    title: str
    task: str
    targets: Callable[[GovernorConfig], Sequence[TargetT]]
    factory: Callable[[ActuatorServices], Actuator[TargetT]]
    capabilities: Capabilities
    knobs: frozenset[str] | None = None
    operations: frozenset[str] = frozenset()
    poll_interval_s: Callable[[TargetT], float] | None = None
    routed: bool = True
