"""The fleet registrar: this governor's instances, registered in etcd under one lease.

Every ``refresh_s`` the registrar renews its lease and writes the records that changed since
the last write (knobs, health, version); a record of an instance no longer configured is
deleted. The lease is what makes a dead governor disappear: nobody renews it, and etcd deletes
every key bound to it ``lease_ttl_s`` later. A lease found gone (etcd restored, or renewals
lost for longer than the TTL) is replaced and every record written again. A graceful stop
revokes the lease, so the fleet sees the governor leave at once.

While etcd cannot be reached the registrar keeps trying at the same pace; its state says so
(``fleet status`` and the logs), and nothing else of the governor waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from daemon.core.clock import Clock
from daemon.fleet.errors import FleetError
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.records import MemberRecord

log = logging.getLogger(__name__)

# What to register now: one record per instance (``since`` is the registrar's to fill in).
FactsOf = Callable[[], Sequence[MemberRecord]]


class Registrar:
    """Keeps this governor's instances registered under one lease.

    Args:
        client: The etcd client.
        keys: The fleet's key layout.
        ttl_s: The lease's time to live.
        refresh_s: Seconds between renewals.
        facts: The records to register now.
        clock: The injected clock (``since`` is wall-clock time).
    """

    def __init__(
        self,
        client: EtcdGateway,
        keys: FleetKeys,
        *,
        ttl_s: int,
        refresh_s: float,
        facts: FactsOf,
        clock: Clock,
    ) -> None:
        self._client = client
        self._keys = keys
        self._ttl_s = ttl_s
        self._refresh_s = refresh_s
        self._facts = facts
        self._clock = clock
        self._lease = 0
        self._since = ""
        self._written: dict[str, MemberRecord] = {}
        self.reachable: bool | None = None  # None until the first attempt
        self.last_error = ""

    @property
    def lease(self) -> int:
        """The lease in use (0: none yet)."""
        return self._lease

    async def run(self, started: Callable[[], None]) -> None:
        """Register and renew until cancelled; revoke the lease on the way out."""
        # Ready at once: a fleet that cannot be reached must not hold the governor's start.
        started()
        try:
            while True:
                await self.refresh()
                await asyncio.sleep(self._refresh_s)
        finally:
            await self._leave()

    async def refresh(self) -> None:
        """One renewal and the writes it needs; a failure is recorded, not raised."""
        try:
            await self._renew()
            await self._write()
        except FleetError as exc:
            if self.reachable is not False:
                log.warning("fleet registration failed", extra={"error": str(exc)})
            self.reachable = False
            self.last_error = str(exc)
            return
        if self.reachable is not True:
            log.info(
                "fleet registration in place",
                extra={"lease": self._lease, "instances": sorted(self._written)},
            )
        self.reachable = True
        self.last_error = ""

    async def _renew(self) -> None:
        if self._lease and await self._client.keep_alive(self._lease) > 0:
            return
        if self._lease:
            log.warning("fleet lease expired; registering again", extra={"lease": self._lease})
        self._lease = await self._client.grant(self._ttl_s)
        self._since = self._clock.wall().isoformat()
        self._written = {}  # every key of the old lease is gone with it

    async def _write(self) -> None:
        wanted = {
            self._keys.member(record.host, record.instance): replace(record, since=self._since)
            for record in self._facts()
        }
        for key, record in wanted.items():
            if self._written.get(key) != record:
                await self._client.put(key, record.to_json(), lease=self._lease)
                self._written[key] = record
        for key in sorted(set(self._written) - set(wanted)):
            await self._client.delete(key)
            del self._written[key]

    async def _leave(self) -> None:
        """Revoke the lease (bounded), so that the fleet sees this governor go at once."""
        if not self._lease:
            return
        with contextlib.suppress(FleetError):
            await self._client.revoke(self._lease)
            log.info("fleet registration withdrawn", extra={"lease": self._lease})
        self._lease = 0
