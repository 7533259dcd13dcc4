from __future__ import annotations

import daemon.api


def test_the_facade_for_actuators_exports_exactly_these_names() -> None:
    # Changing this list changes a promise to actuator authors: do it on purpose.
    assert sorted(daemon.api.__all__) == [
        "Clock",
        "ConfigError",
        "ConfigIssue",
        "GovernorError",
        "SystemClock",
    ]
    for name in daemon.api.__all__:
        assert hasattr(daemon.api, name)
