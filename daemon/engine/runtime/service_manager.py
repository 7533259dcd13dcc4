"""What the engine tells its service manager (systemd), as an interface.

The engine says *what* happened; ``daemon.app`` decides how to say it (``sd_notify`` under
systemd, nothing elsewhere).
"""

from __future__ import annotations

from typing import Protocol


class ServiceManager(Protocol):
    """The service manager's side of the daemon's lifecycle."""

    def ready(self, status: str) -> None:
        """Every task is ready (``READY=1``)."""

    def reloading(self) -> None:
        """A configuration reload has begun (``RELOADING=1``)."""

    def stopping(self) -> None:
        """A graceful stop has begun (``STOPPING=1``)."""

    def status(self, text: str) -> None:
        """A one-line status for ``systemctl status`` (``STATUS=``)."""

    def watchdog(self) -> None:
        """The daemon is alive (``WATCHDOG=1``)."""

    def watchdog_interval(self) -> float | None:
        """Seconds between watchdog pings, or None when no watchdog is armed."""


class NoServiceManager:
    """Used when the daemon runs outside systemd: every message goes nowhere."""

    def ready(self, status: str) -> None:
        """Nothing to tell."""

    def reloading(self) -> None:
        """Nothing to tell."""

    def stopping(self) -> None:
        """Nothing to tell."""

    def status(self, text: str) -> None:
        """Nothing to tell."""

    def watchdog(self) -> None:
        """Nothing to tell."""

    def watchdog_interval(self) -> float | None:
        """No watchdog outside systemd."""
        return None
