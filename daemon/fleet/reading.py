"""The fleet as etcd holds it now: instances, freezes, restart slots and rollouts, in one go.

``fleet status`` prints it; a governor's freeze watch reads the freezes the same way. A record
that cannot be read is kept aside with its key and why, never dropped silently nor guessed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from daemon.fleet.etcd_gateway import EtcdGateway, KeyValue
from daemon.fleet.keys import FleetKeys
from daemon.fleet.records import FreezeRecord, MemberRecord, RecordError
from daemon.fleet.rollout_state import Rollout, RolloutMoveError, Step


@dataclass(frozen=True, slots=True)
class Registered:
    """One registered instance and the lease that keeps it there."""

    record: MemberRecord
    lease: int


@dataclass(frozen=True, slots=True)
class HeldSlot:
    """A restart slot in use: whose, and under which lease."""

    key: str
    holder: str
    lease: int


@dataclass(frozen=True, slots=True)
class ListedRollout:
    """A group change's rollout and the governor driving it now ("": nobody holds the key)."""

    rollout: Rollout
    driver: str

    def as_json(self) -> dict[str, Any]:
        """The rollout as ``fleet status --json`` lists it."""
        rollout = self.rollout
        done = [m for m in rollout.members if rollout.step(m) is Step.APPLIED]
        return {
            "group": rollout.group,
            "policy": rollout.policy,
            "proposal": rollout.proposal or None,
            "phase": rollout.phase.value,
            "canary": rollout.canary,
            "members_done": done,
            "members_remaining": [m for m in rollout.members if m not in done],
            # The key's holder while it is live; the last writer once it has finished.
            "driver": self.driver or rollout.driver or None,
            "driving_now": bool(self.driver),
            "started_at": rollout.started_at or None,
            "updated_at": rollout.updated_at or None,
            "verdict": None if rollout.verdict is None else rollout.verdict.summary(),
            "last": rollout.history[-1] if rollout.history else None,
        }


@dataclass(frozen=True, slots=True)
class FleetReading:
    """The fleet at one moment.

    Attributes:
        members: Every registered instance, by host then instance.
        freezes: Every fleet freeze record, expired or not (the reader judges at its ``now``).
        unreadable: ``(key, why)`` of each record that could not be read.
        slots: The restart slots held now.
        rollouts: The group changes' rollouts, finished ones included, by group and policy.
    """

    members: tuple[Registered, ...]
    freezes: tuple[FreezeRecord, ...]
    unreadable: tuple[tuple[str, str], ...]
    slots: tuple[HeldSlot, ...] = ()
    rollouts: tuple[ListedRollout, ...] = ()

    def freezes_in_force(self, now: datetime) -> list[FreezeRecord]:
        """The freezes that count at ``now``: the fleet's first, then by group."""
        found = [freeze for freeze in self.freezes if freeze.in_force(now)]
        return sorted(found, key=lambda freeze: (freeze.group is not None, freeze.group or ""))

    def as_json(self, now: datetime) -> dict[str, Any]:
        """The reading as ``fleet status --json`` prints it."""
        return {
            "members": [
                {**entry.record.as_json(), "lease": f"{entry.lease:x}"} for entry in self.members
            ],
            "freezes": [freeze.as_json() for freeze in self.freezes_in_force(now)],
            "unreadable": [{"key": key, "why": why} for key, why in self.unreadable],
            "slots": [
                {"slot": slot.key, "holder": slot.holder, "lease": f"{slot.lease:x}"}
                for slot in self.slots
            ],
            "rollouts": [listed.as_json() for listed in self.rollouts],
        }


async def read_freezes(client: EtcdGateway, keys: FleetKeys) -> FleetReading:
    """The fleet's freeze records only (one range)."""
    freezes, unreadable = _freezes(await client.get_prefix(keys.freezes))
    return FleetReading((), tuple(freezes), tuple(unreadable))


async def read_fleet(client: EtcdGateway, keys: FleetKeys) -> FleetReading:
    """Members, freezes, restart slots and rollouts with their drivers (five ranges).

    Raises:
        FleetError: etcd could not be read.
    """
    members: list[Registered] = []
    unreadable: list[tuple[str, str]] = []
    for item in await client.get_prefix(keys.members):
        try:
            members.append(Registered(MemberRecord.from_json(item.value), item.lease))
        except RecordError as exc:
            unreadable.append((item.key, str(exc)))
    freezes, unreadable_freezes = _freezes(await client.get_prefix(keys.freezes))
    members.sort(key=lambda entry: (entry.record.host, entry.record.instance))
    slots = [
        HeldSlot(item.key.removeprefix(keys.all_slots), _holder(item.value), item.lease)
        for item in await client.get_prefix(keys.all_slots)
    ]
    rollouts, unreadable_rollouts = await _rollouts(client, keys)
    return FleetReading(
        tuple(members),
        tuple(freezes),
        (*unreadable, *unreadable_freezes, *unreadable_rollouts),
        tuple(slots),
        tuple(rollouts),
    )


async def _rollouts(
    client: EtcdGateway, keys: FleetKeys
) -> tuple[list[ListedRollout], list[tuple[str, str]]]:
    drivers = {
        item.key.removeprefix(keys.all_rollout_drivers): _host(item.value)
        for item in await client.get_prefix(keys.all_rollout_drivers)
    }
    listed: list[ListedRollout] = []
    unreadable: list[tuple[str, str]] = []
    for item in await client.get_prefix(keys.all_rollouts):
        try:
            rollout = Rollout.from_json(item.value)
        except RolloutMoveError as exc:
            unreadable.append((item.key, str(exc)))
            continue
        driver = drivers.get(f"{rollout.group}/{rollout.policy}", "")
        listed.append(ListedRollout(rollout, driver))
    return listed, unreadable


def _host(raw: bytes) -> str:
    try:
        return str(json.loads(raw)["host"])
    except (ValueError, KeyError, TypeError):
        return "unreadable"


def _holder(raw: bytes) -> str:
    try:
        holder = json.loads(raw)
        return f"{holder['host']}/{holder['instance']}"
    except (ValueError, KeyError, TypeError):
        return "unreadable"


def _freezes(items: list[KeyValue]) -> tuple[list[FreezeRecord], list[tuple[str, str]]]:
    freezes: list[FreezeRecord] = []
    unreadable: list[tuple[str, str]] = []
    for item in items:
        try:
            freezes.append(FreezeRecord.from_json(item.value))
        except RecordError as exc:
            unreadable.append((item.key, str(exc)))
    return freezes, unreadable
