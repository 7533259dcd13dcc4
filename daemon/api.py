"""The public facade of the governor for ``actuators``: the only module they may import.

Everything exported here is a promise to actuator authors; a test pins the names so that a
change to this surface is a deliberate one. Actuators get: the clock; the error tree they
raise or meet; the configuration of a vLLM instance and its knob envelopes; the knob
catalogue; the pure envelope checks; the freeze files; the actuation contract (requests,
results, the journal and signal windows the engine lends them); the admission gate's knob
(``gate_cap``, its envelope, the gate's runtime, the cap journal and its rows) and the gate as
a restart drains it; the daemon's HTTP client (one exchange within its deadlines); and the one
actuator protocol with the table entry that declares a kind (its settings section, its
factory, its capabilities), with the configuration a kind reads its targets from.
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
    JournalState,
    SignalWindows,
)
from daemon.core.actuator_kinds import (
    Actuator,
    ActuatorKind,
    ActuatorServices,
    Capabilities,
)
from daemon.core.batch_hold import BatchHold, no_batch_hold
from daemon.core.clock import Clock, SystemClock
from daemon.core.envelopes import envelope_problem, envelope_problems, pace_problem
from daemon.core.errors import (
    ActuationError,
    ActuationRefused,
    ChangeInFlight,
    ConfigError,
    ConfigIssue,
    ConfigWriteError,
    GovernorError,
    HttpExchangeError,
)
from daemon.core.freeze_sources import NO_FREEZE_SOURCE, FreezeSource
from daemon.core.freezes import freeze_reason
from daemon.core.gate_actuation import (
    CAP_APPLIED,
    CAP_FAILED,
    CAP_REFUSED,
    CAP_REVERTED,
    CAP_UNCHANGED,
    GATE_CAP_KNOB,
    MAX_NUM_SEQS,
    NO_CHANGE,
    CapJournal,
    CapResult,
    CapState,
    GateCapLookup,
    GateRuntime,
    cap_envelope,
    no_gate_caps,
)
from daemon.core.gate_drain import GateDrain, GateLookup, no_gates
from daemon.core.http_client import HttpLimits, HttpResponse, http_request
from daemon.core.http_log_level_settings import LOG_LEVEL_KNOB, HttpLogLevelTarget
from daemon.core.knobs import KNOBS, LOG_LEVELS, Knob, Safer
from daemon.core.restart_slots import NO_RESTART_SLOTS, RestartSlots
from daemon.core.settings import Envelope, GovernorConfig, VllmInstance

__all__ = [
    "ABANDONED",
    "APPLIED_STATES",
    "CAP_APPLIED",
    "CAP_FAILED",
    "CAP_REFUSED",
    "CAP_REVERTED",
    "CAP_UNCHANGED",
    "DONE",
    "DRY_RUN",
    "FAILED",
    "GATE_CAP_KNOB",
    "KNOBS",
    "LOG_LEVELS",
    "LOG_LEVEL_KNOB",
    "MAX_NUM_SEQS",
    "NO_CHANGE",
    "NO_FREEZE_SOURCE",
    "NO_RESTART_SLOTS",
    "OPEN",
    "REFUSED",
    "REVERTED",
    "ActuationError",
    "ActuationJournal",
    "ActuationRefused",
    "ActuationResult",
    "Actuator",
    "ActuatorKind",
    "ActuatorServices",
    "BatchHold",
    "CapJournal",
    "CapResult",
    "CapState",
    "Capabilities",
    "ChangeInFlight",
    "ChangeRequest",
    "Clock",
    "ConfigError",
    "ConfigIssue",
    "ConfigWriteError",
    "Envelope",
    "FreezeSource",
    "GateCapLookup",
    "GateDrain",
    "GateLookup",
    "GateRuntime",
    "GovernorConfig",
    "GovernorError",
    "HttpExchangeError",
    "HttpLimits",
    "HttpLogLevelTarget",
    "HttpResponse",
    "JournalEntry",
    "JournalState",
    "Knob",
    "RestartSlots",
    "Safer",
    "SignalWindows",
    "SystemClock",
    "VllmInstance",
    "cap_envelope",
    "envelope_problem",
    "envelope_problems",
    "freeze_reason",
    "http_request",
    "no_batch_hold",
    "no_gate_caps",
    "no_gates",
    "pace_problem",
]
