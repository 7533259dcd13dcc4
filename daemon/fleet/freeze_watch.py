"""The fleet freeze, as this governor honours it: read from etcd every refresh, asked at preflight.

The watch reads the fleet's freeze keys every ``refresh_s`` (one range; the daemon's HTTP
client reads whole answers, so it polls rather than streams) and answers
:meth:`FleetFreezeWatch.freeze_reason` from what it read last, without waiting: preflight never
blocks on etcd. It is a :class:`~daemon.core.freeze_sources.FreezeSource`:

- a freeze of the fleet, or of the instance's group, in force at ``now``: held, whatever the
  change, with the freeze's reason, expiry and author;
- a freeze record that cannot be read: held too (as an unreadable freeze file is);
- the last read failed (etcd unreachable, no quorum), the last good one is older than
  ``stale_after_s`` (a watch that stopped), or nothing was read yet since the start: the fleet's
  state is unknown, so a change that restarts a server is held (fail safe: no restart anywhere
  while a fleet cannot be seen) and a live change goes on. A restart is rare and can wait for
  the next good read; a freeze missed for want of one cannot be undone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from daemon.core.clock import Clock
from daemon.core.fleet_settings import FleetSection
from daemon.fleet.errors import FleetError
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.reading import FleetReading, read_freezes

log = logging.getLogger(__name__)


class FleetFreezeWatch:
    """The fleet's freezes as last read, and the loop that reads them.

    Args:
        client: The etcd client.
        keys: The fleet's key layout.
        group_of: The group of an instance.
        refresh_s: Seconds between reads.
        stale_after_s: Past this age, what was read no longer counts: the state is unknown.
        clock: The injected clock (the age of a reading is on its monotonic side).
    """

    def __init__(
        self,
        client: EtcdGateway,
        keys: FleetKeys,
        *,
        group_of: Callable[[str], str],
        refresh_s: float,
        stale_after_s: float,
        clock: Clock,
    ) -> None:
        self._client = client
        self._keys = keys
        self._group_of = group_of
        self._refresh_s = refresh_s
        self._stale_after_s = stale_after_s
        self._clock = clock
        self._reading: FleetReading | None = None
        self._read_at: float | None = None
        self.last_error = "not read yet"

    async def run(self, started: Callable[[], None]) -> None:
        """Read the freezes every ``refresh_s`` until cancelled."""
        started()  # an unknown state holds restarts already; nothing needs to wait for etcd
        while True:
            await self.refresh()
            await asyncio.sleep(self._refresh_s)

    async def refresh(self) -> None:
        """One read; after a failure the state is unknown until a read succeeds again."""
        try:
            reading = await read_freezes(self._client, self._keys)
        except FleetError as exc:
            if not self.last_error:
                log.warning("fleet freezes cannot be read", extra={"error": str(exc)})
            self.last_error = str(exc)
            return
        if self.last_error:
            log.info("fleet freezes read", extra={"freezes": len(reading.freezes)})
        self._reading = reading
        self._read_at = self._clock.monotonic()
        self.last_error = ""

    def freeze_reason(self, instance: str, now: datetime, *, restart: bool) -> str:
        """Why changes of ``instance`` are held by the fleet at ``now``; "" when they are not."""
        reading = self._fresh_reading()
        if reading is None:
            if not restart:
                return ""
            return (
                f"fleet state unknown (etcd last read {self._age_text()}: {self.last_error}): "
                "no restart while a fleet is configured and cannot be seen"
            )
        for key, why in reading.unreadable:
            return f"an unreadable fleet freeze at {key} ({why}): treated as a freeze"
        group = self._group_of(instance)
        for freeze in reading.freezes_in_force(now):
            if freeze.covers(group):
                return freeze.describe()
        return ""

    def status(self) -> dict[str, object]:
        """Whether the fleet is seen now, for ``vllm-governor status``."""
        seen = self._fresh_reading() is not None
        return {
            "seen": seen,
            "last_read": self._age_text(),
            "error": self.last_error,
            "freezes": len(self._reading.freezes) if seen and self._reading else 0,
        }

    def _fresh_reading(self) -> FleetReading | None:
        if self._read_at is None or self.last_error:
            return None
        if self._clock.monotonic() - self._read_at > self._stale_after_s:
            return None
        return self._reading

    def _age_text(self) -> str:
        if self._read_at is None:
            return "never"
        return f"{self._clock.monotonic() - self._read_at:.0f} s ago"


async def freezes_now(section: FleetSection, clock: Clock) -> FleetFreezeWatch:
    """A watch that has read the fleet's freezes once, for a command run without the daemon.

    ``apply --dry-run --set`` builds its own actuator: this gives it the same answers a running
    governor's watch would (unknown, and so holding restarts, when etcd cannot be read).
    """
    watch = FleetFreezeWatch(
        EtcdGateway(section.endpoints, section.request_timeout_s),
        FleetKeys(section.prefix),
        group_of=section.group_of,
        refresh_s=section.refresh_s,
        stale_after_s=section.lease_ttl_s,
        clock=clock,
    )
    await watch.refresh()
    return watch
