"""The journal's account of a server's last hour: one change in flight, and the recent ones.

Preflight (:mod:`actuators.vllm.preflight`) is pure; what it needs from the journal is read
here: whether a change of the server is open (one change in flight per server, across
processes and restarts), and when each knob was changed and the server restarted within the
hour (dwell, hourly budgets, the restart envelope). The vLLM actuator and a backtest's
would-have actuator read it the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from daemon.api import ActuationJournal, ChangeInFlight

HOUR = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class RecentChanges:
    """A server's applied changes of the last hour, as preflight reads them.

    Attributes:
        changed_at: Knob -> when each change of it ended.
        restarted_at: When each change (a restart) ended.
    """

    changed_at: dict[str, list[datetime]] = field(default_factory=dict)
    restarted_at: list[datetime] = field(default_factory=list)


def recent_changes(journal: ActuationJournal, target: str, now: datetime) -> RecentChanges:
    """The changes of ``target`` that restarted it within the hour before ``now``.

    Raises:
        ChangeInFlight: another change of ``target`` is open in the journal.
    """
    if journal.open_entry(target) is not None:
        message = f"another change of {target} is in flight"
        raise ChangeInFlight(message)
    recent = RecentChanges()
    for entry in journal.applied_since(target, now - HOUR):
        ended = entry.finished_at or entry.started_at
        recent.restarted_at.append(ended)
        for knob in entry.plan.get("knobs", {}):
            recent.changed_at.setdefault(knob, []).append(ended)
    return recent
