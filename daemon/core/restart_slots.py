"""Restart slots: a port the vLLM actuator takes a slot from before it restarts a server.

Alone, a governor restarts when its own checks allow. In a fleet, the replicas of one service
share a disruption budget (``max_unavailable``): a restart first takes one of the group's slots
(in etcd, ``daemon.fleet``) and gives it back once the server is verified healthy again, so
that no more than the budget of replicas is ever down for a change at once.
"""

from __future__ import annotations

from typing import Protocol


class RestartSlots(Protocol):
    """The slots of a disruption budget, as an actuator takes and returns them."""

    async def acquire(self, instance: str) -> str:
        """Take a slot for a restart of ``instance``, waiting within the source's bound.

        Returns:
            "" once a slot is held; otherwise why none could be taken (the change is refused
            with that reason: no slot free within the bound, or the fleet cannot be seen).
        """
        ...

    async def release(self, instance: str) -> None:
        """Give back the slot of ``instance`` (its server is verified healthy again)."""
        ...


class NoRestartSlots:
    """The slots of a governor in no fleet: every restart may go, as its own checks allow."""

    async def acquire(self, instance: str) -> str:
        """Always "": no budget to share."""
        return ""

    async def release(self, instance: str) -> None:
        """Nothing to give back."""


NO_RESTART_SLOTS = NoRestartSlots()
