"""Setting and lifting a fleet freeze: one key each for the fleet and for every group.

A freeze is bound to no lease (it must outlive whoever set it, even a CLI that exits at once);
it carries its own expiry, so a forgotten freeze ends by itself, and every governor judges the
expiry on its own clock.
"""

from __future__ import annotations

from datetime import datetime

from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.records import FreezeRecord


async def freeze(
    client: EtcdGateway,
    keys: FleetKeys,
    *,
    group: str | None,
    until: datetime,
    reason: str,
    by: str,
) -> FreezeRecord:
    """Freeze ``group`` (None: the whole fleet) until ``until``; a freeze already there is replaced.

    Raises:
        FleetError: etcd could not be written.
    """
    record = FreezeRecord(group=group, until=until, reason=" ".join(reason.split()), by=by)
    await client.put(keys.freeze(group), record.to_json())
    return record


async def unfreeze(client: EtcdGateway, keys: FleetKeys, *, group: str | None) -> bool:
    """Lift the freeze of ``group`` (None: the fleet's own); False when there was none.

    Raises:
        FleetError: etcd could not be written.
    """
    return await client.delete(keys.freeze(group)) > 0


class FleetFreezer:
    """Sets and lifts the freezes of one fleet (the CLI's and Slack's way in).

    Args:
        client: The etcd client.
        keys: The fleet's key layout.
    """

    def __init__(self, client: EtcdGateway, keys: FleetKeys) -> None:
        self._client = client
        self._keys = keys

    async def freeze(
        self, group: str | None, until: datetime, reason: str, *, by: str
    ) -> FreezeRecord:
        """Freeze ``group`` (None: the whole fleet) until ``until``.

        Raises:
            FleetError: etcd could not be written.
        """
        return await freeze(
            self._client, self._keys, group=group, until=until, reason=reason, by=by
        )

    async def unfreeze(self, group: str | None) -> bool:
        """Lift the freeze of ``group`` (None: the fleet's own); False when there was none.

        Raises:
            FleetError: etcd could not be written.
        """
        return await unfreeze(self._client, self._keys, group=group)
