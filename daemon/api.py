"""The public facade of the governor for ``actuators``: the only module they may import.

Everything exported here is a promise to actuator authors; a test pins the names so that a
change to this surface is a deliberate one. Actuators get: the clock; the error tree they
raise or meet; the configuration of a vLLM instance and its knob envelopes; the knob
catalogue; the pure envelope checks; and the actuation contract (requests, results, the
journal and signal windows the engine lends them).
"""

from __future__ import annotations

from daemon.core.actuation import (
    ABANDONED,
    APPLIED_STATES,
    DONE,
    DRY_RUN,
    FAILED,
    OPEN,
    REFUSED,
    REVERTED,
    ActuationJournal,
    ActuationResult,
    ChangeRequest,
    JournalEntry,
    SignalWindows,
)
from daemon.core.clock import Clock, SystemClock
from daemon.core.envelopes import envelope_problem, pace_problem
from daemon.core.errors import (
    ActuationError,
    ActuationRefused,
    ChangeInFlight,
    ConfigError,
    ConfigIssue,
    ConfigWriteError,
    GovernorError,
)
from daemon.core.knobs import KNOBS, LOG_LEVELS, Knob, Safer
from daemon.core.settings import Envelope, VllmInstance

__all__ = [
    "ABANDONED",
    "APPLIED_STATES",
    "DONE",
    "DRY_RUN",
    "FAILED",
    "KNOBS",
    "LOG_LEVELS",
    "OPEN",
    "REFUSED",
    "REVERTED",
    "ActuationError",
    "ActuationJournal",
    "ActuationRefused",
    "ActuationResult",
    "ChangeInFlight",
    "ChangeRequest",
    "Clock",
    "ConfigError",
    "ConfigIssue",
    "ConfigWriteError",
    "Envelope",
    "GovernorError",
    "JournalEntry",
    "Knob",
    "Safer",
    "SignalWindows",
    "SystemClock",
    "VllmInstance",
    "envelope_problem",
    "pace_problem",
]
