"""The disruption budget: a semaphore of restart slots per group, in etcd (the locksmith pattern).

A group of ``n`` registered replicas with ``max_unavailable`` ``k`` (a count, or a share of
``n``) has slots ``slots/GROUP/0`` .. ``slots/GROUP/k-1``. Taking one is a create-only
transaction (``create_revision == 0``) on the first free key, bound to this governor's lease:
two governors can never hold the same slot, and a governor that dies (kill -9, a lost host)
frees its slots when its lease expires, with nobody's help. A slot is given back, by deleting
its key, once the restarted server is verified healthy. The governor that already holds a
slot for an instance (an earlier change whose server did not come back healthy) takes the same
one again rather than a second.

With no free slot, :meth:`FleetRestartSlots.acquire` polls every ``poll_s`` up to
``wait_s``, then answers why not: the group, its budget, and who holds the slots. When etcd
cannot be read, or this governor holds no lease yet, the answer is a refusal too: no restart
while the fleet cannot be seen.

A call that etcd did not answer may still have been done (see
:mod:`daemon.fleet.etcd_gateway`): a create may hold a slot this governor does not know of, a
delete may not have happened. Such a slot would stay bound to a lease that lives on, and block
its group for good. So after any unanswered call the keeper (:meth:`FleetRestartSlots.run`)
lists the slots at each ``poll_s`` until it can, and gives back every one held under this
governor's lease for no restart in progress.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from daemon.core.clock import Clock
from daemon.core.fleet_settings import Budget, budget_slots
from daemon.fleet.errors import FleetError
from daemon.fleet.etcd_gateway import EtcdGateway, KeyValue
from daemon.fleet.keys import FleetKeys
from daemon.fleet.records import MemberRecord, RecordError

log = logging.getLogger(__name__)


class FleetRestartSlots:
    """This governor's side of every group's restart semaphore.

    Args:
        client: The etcd client.
        keys: The fleet's key layout.
        host: This governor's name in the fleet.
        lease: The lease slots are bound to (the registrar's; 0 while there is none).
        group_of: The group of an instance.
        budget_of: The ``max_unavailable`` of a group.
        wait_s: How long a restart waits for a free slot.
        poll_s: How often it looks again meanwhile.
        clock: The injected clock (the wait's deadline is on its monotonic side).
    """

    def __init__(
        self,
        client: EtcdGateway,
        keys: FleetKeys,
        *,
        host: str,
        lease: Callable[[], int],
        group_of: Callable[[str], str],
        budget_of: Callable[[str], Budget],
        wait_s: float,
        poll_s: float,
        clock: Clock,
    ) -> None:
        self._client = client
        self._keys = keys
        self._host = host
        self._lease = lease
        self._group_of = group_of
        self._budget_of = budget_of
        self._wait_s = wait_s
        self._poll_s = poll_s
        self._clock = clock
        self._held: dict[str, str] = {}  # instance -> its slot's key
        self._lock = asyncio.Lock()  # one look at the slots at a time: acquire, tidy
        self.unsure = False  # a call went unanswered: a slot may be held unknowingly

    async def acquire(self, instance: str) -> str:
        """Hold a slot of the instance's group; "" when held, else why not."""
        group = self._group_of(instance)
        deadline = self._clock.monotonic() + self._wait_s
        while True:
            try:
                async with self._lock:
                    why = await self._try(instance, group)
            except FleetError as exc:
                self.unsure = True
                return (
                    f"no restart slot of group {group}: the fleet cannot be read ({exc}); "
                    "no restart while a fleet is configured and cannot be seen"
                )
            if not why:
                return ""
            if self._clock.monotonic() + self._poll_s > deadline:
                return f"{why}; waited {self._wait_s:g} s (slot_wait_s)"
            await asyncio.sleep(self._poll_s)

    async def release(self, instance: str) -> None:
        """Give the slot back (a failure is logged; the lease frees it at worst)."""
        key = self._held.pop(instance, None)
        if key is None:
            return
        try:
            await self._client.delete(key)
        except FleetError as exc:
            # Still bound to this governor's lease: the keeper gives it back once etcd answers.
            self.unsure = True
            log.warning("restart slot not given back", extra={"slot": key, "error": str(exc)})
            return
        log.info("restart slot given back", extra={"slot": key, "instance": instance})

    async def run(self, started: Callable[[], None]) -> None:
        """The keeper: after an unanswered call, tidy at each ``poll_s`` until it works."""
        started()
        while True:
            await asyncio.sleep(self._poll_s)
            if self.unsure:
                await self.tidy()

    async def tidy(self) -> None:
        """Give back every slot held under this governor's lease for no restart in progress."""
        lease = self._lease()
        if not lease:
            return
        try:
            async with self._lock:
                held = set(self._held.values())
                for kv in await self._client.get_prefix(self._keys.all_slots):
                    if kv.lease == lease and kv.key not in held:
                        await self._client.delete(kv.key)
                        log.warning("stray restart slot given back", extra={"slot": kv.key})
        except FleetError:
            return  # still unsure: the next round tries again
        self.unsure = False

    async def _try(self, instance: str, group: str) -> str:
        """One attempt; "" when a slot is held, else who holds them all."""
        lease = self._lease()
        if not lease:
            return f"no restart slot of group {group}: this governor is not registered yet"
        slots = budget_slots(self._budget_of(group), await self._group_size(group))
        taken = {kv.key: kv for kv in await self._client.get_prefix(self._keys.slots(group))}
        mine = self._holder(instance)
        for kv in taken.values():
            if kv.value == mine and kv.lease == lease:  # held already (an earlier change)
                self._held[instance] = kv.key
                return ""
        for index in range(slots):
            key = f"{self._keys.slots(group)}{index}"
            if key not in taken and await self._client.create(key, mine, lease=lease):
                self._held[instance] = key
                log.info("restart slot taken", extra={"slot": key, "instance": instance})
                return ""
        holders = ", ".join(_holder_text(kv) for kv in taken.values()) or "none readable"
        budget = self._budget_of(group)
        return (
            f"no restart slot free in group {group} (max_unavailable {budget}: {slots} "
            f"slot(s); held by {holders})"
        )

    async def _group_size(self, group: str) -> int:
        size = 0
        for kv in await self._client.get_prefix(self._keys.members):
            try:
                size += MemberRecord.from_json(kv.value).group == group
            except RecordError:
                continue
        return max(size, 1)

    def _holder(self, instance: str) -> bytes:
        return json.dumps({"host": self._host, "instance": instance}, sort_keys=True).encode()


def _holder_text(kv: KeyValue) -> str:
    try:
        holder = json.loads(kv.value)
        return f"{holder['host']}/{holder['instance']}"
    except (ValueError, KeyError, TypeError):
        return kv.key
