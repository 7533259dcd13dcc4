"""Freeze sources besides the freeze files: a port every change's preflight consults.

The freeze files (:mod:`daemon.core.freezes`) are read where they lie; another source, such
as the fleet's freeze in etcd (``daemon.fleet``), reaches an actuator through this port. A
source answers for one target at one moment, and is told whether the change would restart
something: a source whose own state is unknown (etcd cannot be read) holds restarts, to be
safe, and lets live changes through.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class FreezeSource(Protocol):
    """Something that may freeze changes of a target, besides the freeze files."""

    def freeze_reason(self, instance: str, now: datetime, *, restart: bool) -> str:
        """Why changes of ``instance`` are held at ``now``; "" when they are not.

        Args:
            instance: The target's name.
            now: Wall-clock time, for expiries.
            restart: Whether the change would restart a server (a source that cannot tell
                whether it is frozen holds these, and only these).
        """
        ...


class NoFreezeSource:
    """The source of a governor that is in no fleet: it never freezes anything."""

    def freeze_reason(self, instance: str, now: datetime, *, restart: bool) -> str:
        """Always "": nothing besides the freeze files holds changes."""
        return ""


NO_FREEZE_SOURCE = NoFreezeSource()
