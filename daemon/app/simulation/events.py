"""What a controller did to the simulated server, in order: the raw material of the metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

# Kinds that change the server (count as actions): a restart into new settings, a revert, a
# plain restart operation, a new admission cap at the gate.
RESTART, REVERT, CAP = "restart", "revert", "cap"
SERVER_CHANGES = frozenset({RESTART, REVERT, CAP})
# Kinds that record the governor's process around them.
PROPOSED, APPROVED, REJECTED, WITHDRAWN = "proposed", "approved", "rejected", "withdrawn"
REFUSED, VERIFIED, QUARANTINED = "refused", "verified", "quarantined"
# A tuned change's effect, measured by the governor against its what-if's prediction.
REALISED = "realised"


@dataclass(frozen=True, slots=True)
class Event:
    """One thing a controller did.

    Attributes:
        at: Virtual time (s).
        kind: One of the kinds above.
        policy: The policy (or baseline) behind it.
        changes: Knob -> (old, new) for restarts, reverts and caps (knob ``gate_cap``).
        detail: A sentence for people.
        figures: Numbers the kind carries (a realised effect: the goodput predicted and
            realised, the error, whether the window was comparable as 1 or 0).
    """

    at: float
    kind: str
    policy: str
    changes: dict[str, tuple[float, float]] = field(default_factory=dict)
    detail: str = ""
    figures: dict[str, float] = field(default_factory=dict)


class EventLog:
    """The events of one run, appended in time order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(
        self,
        at: float,
        kind: str,
        policy: str,
        changes: dict[str, tuple[float, float]] | None = None,
        detail: str = "",
    ) -> None:
        """Append one event."""
        self.events.append(Event(at, kind, policy, changes or {}, detail))

    def server_changes(self) -> list[Event]:
        """The events that changed the server or its gate."""
        return [event for event in self.events if event.kind in SERVER_CHANGES]
