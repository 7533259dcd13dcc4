"""What evaluation produces: decisions that carry their evidence.

A decision says what a policy concluded on a target at a time, and why: the signal values it
read, the condition it tested, and (when it did not act) which guard stopped it. Decisions are
what the audit log, ``explain``, policy tests and approval messages are made of.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class DecisionKind(Enum):
    """The kinds of decision."""

    FIRED = "fired"  # started firing
    RESOLVED = "resolved"  # stopped firing (evidence: the exit condition; details: firing_for_s)
    INTENT = "intent"  # wants to act: goes to the planner, then the gate
    BLOCKED = "blocked"  # wanted to act; a guard said no (recorded once per guard)
    SHADOW = "shadow"  # would have acted, but the policy is in shadow mode
    ALERT = "alert"  # fires on missing data (assume_bad): tells people, never acts
    NOTIFY = "notify"  # a notify action: tells people (details: text, channels), never acts
    TUNE = "tune"  # a tune action is due: the engine runs a what-if (details: the question)
    REALISED = "realised"  # a tuned change's effect measured (details: predicted, realised, error)
    ERROR = "error"  # a condition failed to evaluate (details: error); recorded once per message


@dataclass(frozen=True, slots=True)
class Evidence:
    """Why: the values read and the condition tested.

    Attributes:
        condition: The expression that decided (``when`` or ``clear``).
        signals: The value of each signal it read (None: no fresh data).
        held_for_s: How long the condition had held.
        note: A sentence for people.
    """

    condition: str
    signals: dict[str, Any]
    held_for_s: float | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Intent:
    """What an acting policy asks for: knob values (before envelopes) or an operation."""

    changes: dict[str, float]  # knob -> desired value, computed from `current`
    current: dict[str, float]  # knob -> its value when the policy decided
    operation: str | None
    risk: str


@dataclass(frozen=True, slots=True)
class Decision:
    """One conclusion of one policy on one target."""

    policy: str
    target: str
    at: float
    kind: DecisionKind
    evidence: Evidence
    intent: Intent | None = None
    guard: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
