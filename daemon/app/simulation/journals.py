"""What a governed simulation did, read back from the governor's own journals.

The actuation journal says when each restart and each revert's restart began (its steps
``restarting`` and ``revert_restarting``), with the plan's knob moves, and how each change
ended: verified (``done``), reverted and quarantined, refused by preflight (with the reason),
or failed. The gate's journal holds every cap the admission loop set. The decision log holds
each tuned change's ``realised`` effect: the goodput its what-if predicted, the goodput measured
from the server's histograms once it was in force, and the error between them. Proposals and
their answers are logged by the simulated approver as they happen.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from actuators.vllm.steps import Step
from daemon.app.simulation.clock import EPOCH
from daemon.app.simulation.events import (
    CAP,
    QUARANTINED,
    REALISED,
    REFUSED,
    RESTART,
    REVERT,
    VERIFIED,
    Event,
    EventLog,
)
from daemon.core.actuation import DONE, FAILED, REVERTED
from daemon.core.actuation import REFUSED as REFUSED_STATE
from daemon.core.clock import SystemClock
from daemon.core.gate_actuation import CAP_APPLIED, CAP_REVERTED
from daemon.engine.storage.cap_journal import SqliteCapJournal
from daemon.engine.storage.journal_store import SqliteJournal
from daemon.engine.storage.state_db import STATE_FILE
from daemon.engine.storage.state_store import StateStore
from daemon.policy.decisions import DecisionKind

_EVERY = 1_000_000  # read the whole journal back


def read_events(state_dir: Path, target: str, logged: EventLog) -> EventLog:
    """Every event of the run in time order: the journals' and those ``logged`` already."""
    events = list(logged.events)
    journal = SqliteJournal(state_dir / STATE_FILE, SystemClock())
    try:
        for entry in reversed(journal.recent(_EVERY)):
            moves = {k: (float(v[0]), float(v[1])) for k, v in entry.plan.get("knobs", {}).items()}
            back = {knob: (new, old) for knob, (old, new) in moves.items()}
            for at, step in journal.steps(entry.id):
                if step == Step.RESTARTING:
                    events.append(Event(_seconds(at), RESTART, entry.policy, moves))
                elif step == Step.REVERT_RESTARTING:
                    events.append(Event(_seconds(at), REVERT, entry.policy, back))
            ended = _seconds(entry.finished_at or entry.started_at)
            outcome = entry.outcome or ""
            if entry.state == DONE:
                events.append(Event(ended, VERIFIED, entry.policy, detail=outcome))
            elif entry.state in (REVERTED, FAILED):
                events.append(Event(ended, QUARANTINED, entry.policy, detail=outcome))
            elif entry.state == REFUSED_STATE:
                events.append(Event(ended, REFUSED, entry.policy, detail=outcome))
    finally:
        journal.close()
    caps = SqliteCapJournal(state_dir / STATE_FILE, SystemClock())
    try:
        for row in reversed(caps.recent(target, _EVERY)):
            if row["state"] not in (CAP_APPLIED, CAP_REVERTED):
                continue
            before = float(row["before"]) if row["before"] is not None else float("nan")
            after = float(row["after"]) if row["after"] is not None else float("nan")
            capped_at = float(row["at"]) - EPOCH.timestamp()
            changes = {"gate_cap": (before, after)}
            events.append(Event(capped_at, CAP, str(row["policy"]), changes, str(row["reason"])))
    finally:
        caps.close()
    events.extend(_realised(state_dir))
    result = EventLog()
    result.events = sorted(events, key=lambda event: event.at)
    return result


def _realised(state_dir: Path) -> list[Event]:
    """The tuner's ``realised`` decisions: predicted against measured goodput, and the error."""
    store = StateStore(state_dir / STATE_FILE)
    try:
        rows = store.recent_decisions(_EVERY)
    finally:
        store.close()
    events: list[Event] = []
    for row in rows:
        if row["kind"] != DecisionKind.REALISED.value:
            continue
        details = row["details"]
        figures = {
            "predicted_goodput_rps": float(details["predicted"]["after"]["goodput_rps"]),
            "realised_goodput_rps": float(details["realised"]["goodput_rps"]),
            "goodput_error": float(details["goodput_error"]),
            "comparable": 1.0 if details["comparable"] else 0.0,
        }
        at = float(row["at"]) - EPOCH.timestamp()
        events.append(
            Event(at, REALISED, str(row["policy"]), detail=details["text"], figures=figures)
        )
    return events


def _seconds(at: datetime) -> float:
    return (at - EPOCH).total_seconds()
