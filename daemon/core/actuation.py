"""The contract between the engine and the actuators that change vLLM servers.

The engine hands an actuator a :class:`ChangeRequest`: an intent of a policy that the planner
accepted inside its envelopes. It also lends the actuator two services it implements over its
own state: the :class:`ActuationJournal` (the write-ahead journal and audit of every change, in
the governor's SQLite store) and :class:`SignalWindows` (what the governor's signal store says
about a server over a window, for verification). Actuators see all of this through
:mod:`daemon.api` only, and the engine sees an actuator only as an
:class:`~daemon.core.actuator_kinds.Actuator`, built from its kind's entry in the table.

A journal entry is *open* from before the first file is touched until the change is finished
one way or the other; at most one entry per server is open at a time, which is what "one
change in flight per instance" means across processes and restarts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol


class JournalState(StrEnum):
    """The state of a journal entry: open while in flight, then exactly one of the others.

    A ``StrEnum``: each member is its own string, so the states stored by any governor (the
    ``state`` column of ``actuations``) read back as members, and a member is stored as the
    same text. A string that is not a state is refused where one is expected, never stored.
    """

    OPEN = "open"
    DONE = "done"  # applied and verified
    REVERTED = "reverted"  # applied, failed, and back on the last-known-good config
    ABANDONED = "abandoned"  # stopped before any restart; the files are back as they were
    FAILED = "failed"  # the revert could not bring the server back: people must look
    REFUSED = "refused"  # planning or preflight said no; nothing was touched
    DRY_RUN = "dry_run"  # planned and recorded only


# The members by their old names: what actuators and the engine import.
OPEN = JournalState.OPEN
DONE = JournalState.DONE
REVERTED = JournalState.REVERTED
ABANDONED = JournalState.ABANDONED
FAILED = JournalState.FAILED
REFUSED = JournalState.REFUSED
DRY_RUN = JournalState.DRY_RUN
FINISHED_STATES = (DONE, REVERTED, ABANDONED, FAILED, REFUSED, DRY_RUN)
APPLIED_STATES = (DONE, REVERTED)  # a change that changed the target, for dwell and budgets


@dataclass(frozen=True, slots=True)
class ChangeRequest:
    """What an accepted intent asks of one server.

    Attributes:
        target: The vLLM instance name.
        policy: The policy that decided.
        changes: Knob -> new value, already inside its envelope.
        current: Knob -> the value the policy saw when it decided.
        reason: One sentence for people: the condition and how long it held.
        evidence: The signal values the policy read.
        risk: ``auto`` or ``approval``.
        operation: A named operation instead of knob values (``restart``: a restart on the
            config in force, with ``changes`` empty), or None.
        forecast: For a tune policy's change, the what-if's counterfactual (the shape of
            :class:`daemon.approvals.forecast.Forecast`), journaled with the change; else None.
    """

    target: str
    policy: str
    changes: Mapping[str, float]
    current: Mapping[str, float]
    reason: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    risk: str = "auto"
    operation: str | None = None
    forecast: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One change of one server as the journal holds it.

    Attributes:
        id: The journal's key.
        target: The vLLM instance name.
        policy: The policy that asked for it.
        state: :data:`OPEN` or one of the finished states.
        step: The last step reached (``planned``, ``written``, ``restarting``...).
        plan: What was to be done: changes, old and new file contents, the restart command.
        facts: What was observed on the way (process start times, baseline signals...).
        started_at: When the entry was opened.
        finished_at: When it was finished, or None while open.
        outcome: A sentence saying how it ended.
        timings: Seconds spent in each phase.
        forecast: What the what-if predicted for a tuned change (now and after, the restart's
            cost, the workload), as the proposal and the Slack message showed it; else None.
    """

    id: int
    target: str
    policy: str
    state: JournalState
    step: str
    plan: Mapping[str, Any]
    facts: Mapping[str, Any]
    started_at: datetime
    finished_at: datetime | None = None
    outcome: str = ""
    timings: Mapping[str, float] = field(default_factory=dict)
    forecast: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        """Refuse a state that is not one (a row or a caller's typo), as the member it is."""
        object.__setattr__(self, "state", JournalState(self.state))


@dataclass(frozen=True, slots=True)
class ActuationResult:
    """How a change (or a reconciliation) ended, for the engine to record and react to.

    Attributes:
        target: The vLLM instance name.
        policy: The policy that asked for it.
        state: One of the finished states.
        outcome: A sentence for people.
        changes: Knob -> the value asked for.
        entry_id: The journal entry, or None when nothing was journaled.
        timings: Seconds spent in each phase.
        plan: The plan, as journaled (for dry runs and ``apply --dry-run``).
        quarantine: Whether the policy should be quarantined (its change had to be reverted).
        refusals: When refused: every check that refused it, as (guard, why).
    """

    target: str
    policy: str
    state: JournalState
    outcome: str
    changes: Mapping[str, float] = field(default_factory=dict)
    entry_id: int | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    plan: Mapping[str, Any] = field(default_factory=dict)
    quarantine: bool = False
    refusals: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        """Refuse a state that is not one, as :class:`JournalEntry` does."""
        object.__setattr__(self, "state", JournalState(self.state))


class ActuationJournal(Protocol):
    """The write-ahead journal and audit of changes, kept by the engine in its state store."""

    def begin(
        self,
        target: str,
        policy: str,
        plan: Mapping[str, Any],
        facts: Mapping[str, Any],
        forecast: Mapping[str, Any] | None = None,
    ) -> JournalEntry:
        """Open an entry at step ``planned``, durably, before anything is touched.

        ``forecast`` is a tuned change's counterfactual (:attr:`ChangeRequest.forecast`), kept
        with the entry so that the audit log says what the change was predicted to buy.

        Raises:
            ChangeInFlight: an entry of ``target`` is already open.
        """
        ...

    def step(self, entry_id: int, step: str, facts: Mapping[str, Any] | None = None) -> None:
        """Record that ``step`` was reached, merging ``facts`` into the entry's facts."""
        ...

    def note(self, entry_id: int, facts: Mapping[str, Any]) -> None:
        """Merge ``facts`` into an open entry's facts without reaching a new step."""
        ...

    def finish(
        self, entry_id: int, state: JournalState, outcome: str, timings: Mapping[str, float]
    ) -> JournalEntry:
        """Close an open entry with its final state, outcome and phase timings."""
        ...

    def record(
        self,
        target: str,
        policy: str,
        *,
        state: JournalState,
        outcome: str,
        plan: Mapping[str, Any],
        timings: Mapping[str, float],
    ) -> JournalEntry:
        """Record a change that ends without being opened (refused, dry run), in one go."""
        ...

    def open_entry(self, target: str) -> JournalEntry | None:
        """The open entry of ``target``, if any."""
        ...

    def steps(self, entry_id: int) -> list[tuple[datetime, str]]:
        """Every step of an entry, in order, with the wall-clock time it was reached."""
        ...

    def applied_since(self, target: str, since: datetime) -> list[JournalEntry]:
        """Changes of ``target`` that restarted it (done or reverted) since ``since``."""
        ...


class SignalWindows(Protocol):
    """What the governor's signal store says about one server over a window ending now."""

    def measure(self, target: str, window_s: float) -> Mapping[str, float | None]:
        """Short-named signals (``errors_per_s``, ``ttft_p95_s``, ``preemptions_per_s``).

        A value is None when the window holds too little fresh data: never a zero.
        """
        ...
