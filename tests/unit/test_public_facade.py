from __future__ import annotations

import daemon.api


def test_the_facade_for_actuators_exports_exactly_these_names() -> None:
    # Changing this list changes a promise to actuator authors: do it on purpose.
    assert sorted(daemon.api.__all__) == [
        "ABANDONED",
        "APPLIED_STATES",
        "ActuationError",
        "ActuationJournal",
        "ActuationRefused",
        "ActuationResult",
        "CAP_APPLIED",
        "CAP_FAILED",
        "CAP_REFUSED",
        "CAP_REVERTED",
        "CAP_UNCHANGED",
        "CapChange",
        "CapJournal",
        "CapResult",
        "ChangeInFlight",
        "ChangeRequest",
        "Clock",
        "ConfigError",
        "ConfigIssue",
        "ConfigWriteError",
        "DONE",
        "DRY_RUN",
        "Envelope",
        "FAILED",
        "GateDrain",
        "GateLookup",
        "GateRuntime",
        "GovernorError",
        "HttpLogLevelTarget",
        "JournalEntry",
        "KNOBS",
        "Knob",
        "LOG_LEVELS",
        "LOG_LEVEL_KNOB",
        "LogLevelActuator",
        "OPEN",
        "REFUSED",
        "REVERTED",
        "Safer",
        "SignalWindows",
        "SystemClock",
        "VllmInstance",
        "envelope_problem",
        "envelope_problems",
        "freeze_reason",
        "no_gates",
        "pace_problem",
    ]
    for name in daemon.api.__all__:
        assert hasattr(daemon.api, name)
