"""The would-have timeline, read back from the governor's own records of a backtest.

The governor of a backtest keeps the records the daemon keeps: the decision log (every
decision of every tick, and those the router blocked), the actuation journal (what the
would-have actuator applied, ran dry, or refused with the preflight's guard) and the proposals
(intents of risk ``approval``). Each record carries the wall-clock time it was made, which is
its tick's recorded time: the timeline is these records, tick by tick, in the order they were
made:

* each decision, in the order the evaluator recorded it; an intent's ``route`` says where it
  went: ``auto`` (applied by the would-have actuator), ``dry-run`` (the instance's mode),
  ``approval`` (proposed), or None (blocked: by the router, recorded as the next decision, or
  by the actuator's preflight, recorded as a ``blocked`` event at the end of its tick).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from daemon.app.backtest.recorded_feed import moments
from daemon.app.backtest.recording import RecordedTick
from daemon.core.actuation import DONE, DRY_RUN, REFUSED, JournalEntry
from daemon.core.clock import SystemClock
from daemon.engine.storage.journal_store import SqliteJournal
from daemon.engine.storage.proposal_store import ProposalStore
from daemon.engine.storage.state_store import StateStore

AUTO, APPROVAL, DRY = "auto", "approval", "dry-run"
_ALL = 2**62  # read every record back
_SAME_MOMENT_S = 1e-3  # a record's time and its tick's, as floating-point seconds since 1970

_Key = tuple[int, str, str]  # (tick index, policy, target)


@dataclass(frozen=True, slots=True)
class Event:
    """One decision of the would-have timeline.

    Attributes:
        index: The recorded tick it came from (0-based), the same in every replay of a file.
        at_s: Seconds since the first tick, on the replay's clock.
        wall: The tick's recorded wall-clock time.
        kind: ``fired``, ``resolved``, ``intent``, ``blocked``, ``shadow`` or ``alert``.
        policy: The policy's name.
        target: The vLLM instance.
        route: For an intent that got through: ``auto``, ``dry-run`` or ``approval``.
        changes: Knob values wanted (intents: bounded by the envelopes).
        current: Knob values when the policy decided.
        operation: An operation asked for (``restart``), if any.
        guard: What blocked it (``dwell``, ``knob_budget``, ``cooldown``, ``frozen``...).
        reason: The guard's sentence.
        signals: The evidence: each signal the policy read, and its value.
    """

    index: int
    at_s: float
    wall: datetime
    kind: str
    policy: str
    target: str
    route: str | None = None
    changes: dict[str, float] | None = None
    current: dict[str, float] | None = None
    operation: str | None = None
    guard: str | None = None
    reason: str = ""
    signals: dict[str, Any] = field(default_factory=dict)


class _Ticks:
    """Finds the tick a record was made at, from its wall-clock time."""

    def __init__(self, ticks: Sequence[RecordedTick]) -> None:
        self.ticks = ticks
        self.walls = [tick.wall.timestamp() for tick in ticks]
        self.moments = moments(ticks)

    def index(self, at: float, after: int) -> int:
        """The first tick from ``after`` on made at ``at`` (records come in time order)."""
        for index in range(after, len(self.walls)):
            if abs(self.walls[index] - at) < _SAME_MOMENT_S:
                return index
        return after  # not at a tick's moment: cannot happen for what a tick decided


def read_timeline(state_path: Path, ticks: Sequence[RecordedTick]) -> list[Event]:
    """Every event of the backtest whose governor kept its records at ``state_path``."""
    located = _Ticks(ticks)
    routes, refused = _actuations(state_path, located)
    routes |= _proposals(state_path, located)
    events: list[Event] = []
    pending: list[Event] = []  # the preflight's refusals, shown at the end of their tick
    tick = 0
    for row in _decisions(state_path):
        index = located.index(float(row["at"]), tick)
        if index != tick:
            events.extend(pending)
            pending = []
            tick = index
        event = _event(located, index, row, routes)
        events.append(event)
        if event.kind == "intent" and (entry := refused.get((index, event.policy, event.target))):
            pending.append(_refusal(event, entry))
    events.extend(pending)
    return events


def _decisions(state_path: Path) -> list[dict[str, Any]]:
    store = StateStore(state_path)
    try:
        return list(reversed(store.recent_decisions(_ALL)))
    finally:
        store.close()


def _actuations(
    state_path: Path, located: _Ticks
) -> tuple[dict[_Key, str], dict[_Key, JournalEntry]]:
    """Routes of the changes the actuator took; the entries of those its preflight refused."""
    journal = SqliteJournal(state_path, SystemClock())
    try:
        entries = list(reversed(journal.recent(_ALL)))
    finally:
        journal.close()
    routes: dict[_Key, str] = {}
    refused: dict[_Key, JournalEntry] = {}
    tick = 0
    for entry in entries:
        tick = located.index(entry.started_at.timestamp(), tick)
        key = (tick, entry.policy, entry.target)
        if entry.state == DONE:
            routes[key] = AUTO
        elif entry.state == DRY_RUN:
            routes[key] = DRY
        elif entry.state == REFUSED:
            refused[key] = entry
    return routes, refused


def _proposals(state_path: Path, located: _Ticks) -> dict[_Key, str]:
    store = ProposalStore(state_path)
    try:
        listed = store.listing(_ALL)
    finally:
        store.close()
    proposals = sorted((stored.record.proposal for stored in listed), key=lambda p: p.created_at)
    routes: dict[_Key, str] = {}
    tick = 0
    for proposal in proposals:
        tick = located.index(proposal.created_at.timestamp(), tick)
        routes[(tick, proposal.policy, proposal.instance)] = APPROVAL
    return routes


def _event(
    located: _Ticks, index: int, row: Mapping[str, Any], routes: Mapping[_Key, str]
) -> Event:
    intent = row.get("intent")
    kind = str(row["kind"])
    policy, target = str(row["policy"]), str(row["target"])
    return Event(
        index=index,
        at_s=located.moments[index],
        wall=located.ticks[index].wall,
        kind=kind,
        policy=policy,
        target=target,
        route=routes.get((index, policy, target)) if kind == "intent" else None,
        changes=None if intent is None else dict(intent["changes"]),
        current=None if intent is None else dict(intent["current"]),
        operation=None if intent is None else intent["operation"],
        guard=row["guard"],
        reason=str(row["details"].get("reason", "")),
        signals=dict(row["evidence"]["signals"]),
    )


def _refusal(intent: Event, entry: JournalEntry) -> Event:
    """The preflight's refusal of a would-have change, as a blocked decision of its policy."""
    refusals = entry.plan.get("refusals") or [["refused", entry.outcome]]
    return Event(
        index=intent.index,
        at_s=intent.at_s,
        wall=intent.wall,
        kind="blocked",
        policy=intent.policy,
        target=intent.target,
        changes=intent.changes,
        current=intent.current,
        operation=intent.operation,
        guard=str(refusals[0][0]),
        reason="; ".join(str(why) for _, why in refusals),
        signals=intent.signals,
    )
