"""Group changes' rollouts in etcd: one key per rollout, moved only by compare-and-swap.

``rollouts/GROUP/POLICY`` holds the rollout (:class:`~daemon.fleet.rollout_state.Rollout`),
bound to no lease: it outlives whoever drives it. It is also the group's proposal key: the
governor whose create-only transaction makes it posts the one proposal; the other members'
governors, finding it there, post nothing (a finished rollout is replaced by a new one with
a compare-and-swap, so that two governors cannot both replace it).

``rollout-drivers/GROUP/POLICY`` names the one governor that moves the rollout, bound to its
lease: taken with a create-only transaction, so exactly one governor holds it, and gone when
that governor dies. Every write of the rollout is a transaction that compares both the
rollout's revision (the state the driver read) and the driver key's create revision (the
driver is still the one that took it): a driver that lost its lease, or read a stale state,
writes nothing. When a driver dies, whichever governor takes the freed driver key next
resumes or aborts the rollout: never two.

Members' governors never write the rollout; each writes what it did under
``rollout-reports/GROUP/POLICY/HOST/INSTANCE``, which the driver folds in, and its server's
counts over the comparison window under ``rollout-figures/...``, which the driver judges,
and, before it acts, the step it begins under ``rollout-attempts/...``
(:class:`~daemon.fleet.member_resume.Attempt`), so that it never acts twice on one step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from daemon.fleet.canary_analysis import ServerCounts
from daemon.fleet.etcd_gateway import Compare, EtcdGateway, KeyValue, TxnOp
from daemon.fleet.keys import FleetKeys
from daemon.fleet.member_resume import Attempt
from daemon.fleet.records import MemberRecord, RecordError
from daemon.fleet.rollout_state import MemberReport, Rollout, RolloutMoveError


@dataclass(frozen=True, slots=True)
class StoredRollout:
    """A rollout as read, with the revision a compare-and-swap must name.

    Attributes:
        rollout: The rollout.
        revision: Its key's ``mod_revision`` when read.
    """

    rollout: Rollout
    revision: int


@dataclass(frozen=True, slots=True)
class Proposed:
    """The answer to :meth:`RolloutStore.propose`.

    Attributes:
        created: Whether this call made the rollout (its caller posts the one proposal).
        stored: The rollout in force: this call's, or the one already there.
    """

    created: bool
    stored: StoredRollout


class RolloutStore:
    """The fleet's rollouts, read and moved through etcd.

    Args:
        client: The etcd client.
        keys: The fleet's key layout.
    """

    def __init__(self, client: EtcdGateway, keys: FleetKeys) -> None:
        self._client = client
        self._keys = keys

    async def read(self, group: str, policy: str) -> StoredRollout | None:
        """The rollout of ``policy`` over ``group``, or None when there is none."""
        found = await self._client.get(self._keys.rollout(group, policy))
        return _stored(found) if found else None

    async def read_all(self) -> list[StoredRollout]:
        """Every rollout of the fleet (finished ones included), in key order.

        Raises:
            RolloutMoveError: a rollout key cannot be read.
        """
        return [_stored(kv) for kv in await self._client.get_prefix(self._keys.all_rollouts)]

    async def propose(self, rollout: Rollout) -> Proposed:
        """Make ``rollout`` the group's, unless a live one is there already.

        A finished rollout in the way is replaced (compare-and-swap on its revision, its
        members' reports, counts, posted lines and attempts cleared in the same transaction);
        a live one is returned as it is.
        """
        key = self._keys.rollout(rollout.group, rollout.policy)
        reports = self._keys.rollout_reports(rollout.group, rollout.policy)
        figures = self._keys.rollout_figures(rollout.group, rollout.policy)
        attempts = self._keys.rollout_attempts(rollout.group, rollout.policy)
        lines = self._keys.rollout_lines(rollout.group, rollout.policy)
        absent = Compare(key, "CREATE", 0)
        target = absent
        while True:
            result = await self._client.transaction(
                [target],
                [
                    TxnOp.put(key, rollout.to_json()),
                    TxnOp.delete_prefix(reports),
                    TxnOp.delete_prefix(figures),
                    TxnOp.delete_prefix(lines),
                    TxnOp.delete_prefix(attempts),
                ],
                [TxnOp.get(key)],
            )
            if result.succeeded:
                return Proposed(created=True, stored=StoredRollout(rollout, result.revision))
            if not result.found:
                target = absent  # deleted meanwhile: create it
                continue
            there = _stored(result.found[0])
            if not there.rollout.phase.finished:
                return Proposed(created=False, stored=there)
            target = Compare(key, "MOD", there.revision)

    async def take_driver(self, group: str, policy: str, host: str, lease: int) -> int:
        """Become the rollout's driver; the driver key's create revision, 0 when another is.

        The key is bound to ``lease``: when this governor dies, the key goes with the lease
        and another governor may take it. A governor that holds it already (same lease)
        gets its revision back.

        The key is read first, and the transaction tried only when it is free: every
        governor asks at every look at a live rollout, and etcd commits a transaction that
        may write through raft even when its comparison fails (one raft proposal per
        governor per period, before).
        """
        key = self._keys.rollout_driver(group, policy)
        if (held := await self._client.get(key)) is not None:
            return held.create_revision if held.lease == lease else 0
        value = json.dumps({"host": host}).encode()
        result = await self._client.transaction(
            [Compare(key, "CREATE", 0)], [TxnOp.put(key, value, lease=lease)], [TxnOp.get(key)]
        )
        if result.succeeded:
            return result.revision
        held = result.found[0] if result.found else None
        return held.create_revision if held and held.lease == lease else 0

    async def driver(self, group: str, policy: str) -> str:
        """The host driving the rollout now, or "" when nobody does."""
        found = await self._client.get(self._keys.rollout_driver(group, policy))
        if found is None:
            return ""
        try:
            return str(json.loads(found.value)["host"])
        except (ValueError, KeyError, TypeError):
            return "?"

    async def release_driver(self, group: str, policy: str, driver: int) -> None:
        """Give up driving (the rollout finished): delete the driver key if it is still ours."""
        key = self._keys.rollout_driver(group, policy)
        await self._client.transaction([Compare(key, "CREATE", driver)], [TxnOp.delete(key)])

    async def write(
        self, stored: StoredRollout, moved: Rollout, driver: int
    ) -> StoredRollout | None:
        """Write ``moved`` over ``stored`` if neither it nor the driver key changed since.

        Args:
            stored: The rollout as this driver read it.
            moved: Its next state.
            driver: The driver key's create revision (from :meth:`take_driver`).

        Returns:
            The rollout as now stored, or None when the swap lost (another wrote the rollout,
            or this governor no longer holds the driver key): the caller stops driving.
        """
        rollout = stored.rollout
        key = self._keys.rollout(rollout.group, rollout.policy)
        result = await self._client.transaction(
            [
                Compare(key, "MOD", stored.revision),
                Compare(self._keys.rollout_driver(rollout.group, rollout.policy), "CREATE", driver),
            ],
            [TxnOp.put(key, moved.to_json())],
        )
        return StoredRollout(moved, result.revision) if result.succeeded else None

    async def claim_line(self, rollout: Rollout, line: str, host: str) -> bool:
        """Claim the posting of ``line`` of ``rollout``'s thread; whether this call got it.

        A create-only transaction bound to no lease: of all the governors that ever drive
        the rollout (a dead driver's successor included), exactly one gets each line, and
        posts it (at most once: a claimer that dies before posting loses the line).
        """
        key = (
            f"{self._keys.rollout_lines(rollout.group, rollout.policy)}"
            f"{rollout.proposal or '-'}/{line}"
        )
        value = json.dumps({"host": host}).encode()
        result = await self._client.transaction(
            [Compare(key, "CREATE", 0)], [TxnOp.put(key, value)]
        )
        return result.succeeded

    async def report(self, group: str, policy: str, report: MemberReport) -> None:
        """Record what this member's governor did when the rollout asked."""
        key = f"{self._keys.rollout_reports(group, policy)}{report.member}"
        await self._client.put(key, report.to_json())

    async def reports(self, group: str, policy: str) -> list[MemberReport]:
        """The members' reports to the rollout (one that cannot be read is skipped)."""
        found = []
        for kv in await self._client.get_prefix(self._keys.rollout_reports(group, policy)):
            try:
                found.append(MemberReport.from_json(kv.value))
            except RolloutMoveError:
                continue
        return found

    async def begin(self, group: str, policy: str, attempt: Attempt) -> None:
        """Record that this member's governor begins a step (before it acts on it)."""
        key = f"{self._keys.rollout_attempts(group, policy)}{attempt.member}"
        await self._client.put(key, attempt.to_json())

    async def attempt(self, group: str, policy: str, member: str) -> Attempt | None:
        """The step ``member``'s governor last began in the rollout, if any.

        Raises:
            RolloutMoveError: the record cannot be read (the member must not guess).
        """
        found = await self._client.get(f"{self._keys.rollout_attempts(group, policy)}{member}")
        return Attempt.from_json(found.value) if found else None

    async def publish_figures(self, group: str, policy: str, counts: ServerCounts) -> None:
        """Publish this member's counts over the rollout's comparison window."""
        key = f"{self._keys.rollout_figures(group, policy)}{counts.member}"
        await self._client.put(key, json.dumps(counts.to_dict(), sort_keys=True).encode())

    async def figures(self, group: str, policy: str) -> dict[str, ServerCounts]:
        """The members' published counts, by member (one that cannot be read is skipped)."""
        found = {}
        for kv in await self._client.get_prefix(self._keys.rollout_figures(group, policy)):
            try:
                counts = ServerCounts.from_dict(json.loads(kv.value))
            except (ValueError, KeyError, TypeError):
                continue
            found[counts.member] = counts
        return found

    async def group_members(self, group: str) -> frozenset[str]:
        """The members of ``group`` registered now (``HOST/INSTANCE``, their leases alive)."""
        found = set()
        for kv in await self._client.get_prefix(self._keys.members):
            try:
                record = MemberRecord.from_json(kv.value)
            except RecordError:
                continue
            if record.group == group:
                found.add(f"{record.host}/{record.instance}")
        return frozenset(found)


def _stored(kv: KeyValue) -> StoredRollout:
    return StoredRollout(Rollout.from_json(kv.value), kv.mod_revision)
