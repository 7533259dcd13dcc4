"""The public facade of the governor for ``actuators``: the only module they may import.

Everything exported here is a promise to actuator authors; a test pins the names so that a
change to this surface is a deliberate one.
"""

from __future__ import annotations

from daemon.core.clock import Clock, SystemClock
from daemon.core.errors import ConfigError, ConfigIssue, GovernorError

__all__ = ["Clock", "ConfigError", "ConfigIssue", "GovernorError", "SystemClock"]
