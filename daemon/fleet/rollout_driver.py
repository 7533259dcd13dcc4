"""The rollout driver: the one governor that moves a group change's rollout, canary first.

At each look (every ``poll_s``) the driver reads every live rollout of the fleet. One with no
driver (its proposer never approved it, or its driver died: the driver key went with its
lease) is taken with a create-only transaction bound to this governor's lease; only one
governor can take it, and it writes a line saying so with a compare-and-swap, so the fleet
sees who resumed. On a rollout it drives, the driver folds in the members' reports and
counts (:func:`~daemon.fleet.rollout_steps.advance`) and writes the next state, comparing the
revision it read and its driver key: a lost swap means another governor (or a newer state)
won, and this governor stops driving that rollout. A finished rollout's driver key is given
back.

A ``PROPOSED`` rollout waits for a person; :meth:`RolloutDriver.approve` (the approvals
plane, on an approving click) makes the clicking governor its driver and asks the canary.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace

from daemon.core.clock import Clock
from daemon.fleet.errors import FleetError
from daemon.fleet.rollout_state import Phase, Rollout, RolloutMoveError, approve, reject
from daemon.fleet.rollout_steps import advance
from daemon.fleet.rollout_store import RolloutStore, StoredRollout

log = logging.getLogger(__name__)

Moved = Callable[[Rollout], None]


class RolloutDriver:
    """This governor as the driver of whichever rollouts it holds.

    Args:
        store: The rollouts in etcd.
        host: This governor's name in the fleet.
        lease: The lease its driver keys are bound to (the registrar's; 0 while none).
        slots_of: How many members of a group of a given size may change at once (its
            ``max_unavailable`` in replicas).
        clock: The injected clock (wall time: windows span hosts).
        poll_s: How often it looks.
        moved: Told every state it wrote (the journal, the proposal's thread).
    """

    def __init__(
        self,
        store: RolloutStore,
        *,
        host: str,
        lease: Callable[[], int],
        slots_of: Callable[[str, int], int],
        clock: Clock,
        poll_s: float,
        moved: Moved,
    ) -> None:
        self._store = store
        self._host = host
        self._lease = lease
        self._slots_of = slots_of
        self._clock = clock
        self._poll_s = poll_s
        self._moved = moved
        self._drivers: dict[tuple[str, str], int] = {}  # (group, policy) -> driver key revision

    async def run(self, started: Callable[[], None]) -> None:
        """Look at every ``poll_s`` until cancelled (a failed look is retried at the next)."""
        started()
        while True:
            try:
                await self.look()
            except FleetError as exc:
                log.warning("rollouts not read", extra={"error": str(exc)})
            await asyncio.sleep(self._poll_s)

    async def decide(
        self,
        group: str,
        policy: str,
        by: str,
        *,
        approved: bool,
        proposal: str = "",
        thread: tuple[str, str] = ("", ""),
    ) -> str:
        """A person's decision on the group's proposal; "" when written, else why not.

        ``proposal`` and ``thread`` (its Slack message) go with the rollout, so that whichever
        governor drives it replies in that thread.
        """
        stored = await self._store.read(group, policy)
        if stored is None:
            return f"no rollout of {policy} over group {group}"
        driver = await self._driver(stored.rollout)
        if not driver:
            return f"the rollout of {policy} over group {group} is driven by another governor"
        try:
            if approved:
                members = await self._store.group_members(group)
                at = self._clock.wall().isoformat()
                moved = approve(
                    stored.rollout, by, members, proposal=proposal, thread=thread, at=at
                )
            else:
                moved = reject(stored.rollout, by)
        except RolloutMoveError as exc:
            return str(exc)
        if await self._write(stored, moved, driver) is None:
            return "the rollout changed meanwhile; look again"
        return ""

    async def look(self) -> None:
        """One look at every live rollout (the driver's step on each it holds or can take)."""
        for stored in await self._store.read_all():
            rollout = stored.rollout
            if rollout.phase.finished:
                self._drivers.pop((rollout.group, rollout.policy), None)
                continue
            if rollout.phase is Phase.PROPOSED:
                continue  # a person decides (decide() may have made this governor its driver)
            try:
                await self._drive(stored)
            except RolloutMoveError as exc:
                log.warning("rollout not moved", extra={"group": rollout.group, "error": str(exc)})

    async def _drive(self, stored: StoredRollout) -> None:
        rollout = stored.rollout
        taken = (rollout.group, rollout.policy) not in self._drivers
        driver = await self._driver(rollout)
        if not driver:
            return
        line = f"driven by {self._host} (the previous driver is gone)"
        if taken and rollout.history[-1:] != (line,):
            # Resuming: say so first (a swap only one governor can win).
            moved = replace(rollout, history=(*rollout.history, line))
            written = await self._write(stored, moved, driver)
            if written is None:
                return
            stored = written
        moved = advance(
            stored.rollout,
            reports=await self._store.reports(rollout.group, rollout.policy),
            figures=await self._store.figures(rollout.group, rollout.policy),
            registered=await self._store.group_members(rollout.group),
            now=self._clock.wall(),
            slots=self._slots_of(rollout.group, len(rollout.members)),
        )
        if moved != stored.rollout:
            written = await self._write(stored, moved, driver)
            if written is not None and written.rollout.phase.finished:
                await self._store.release_driver(rollout.group, rollout.policy, driver)
                self._drivers.pop((rollout.group, rollout.policy), None)

    async def _driver(self, rollout: Rollout) -> int:
        key = (rollout.group, rollout.policy)
        if key in self._drivers:
            return self._drivers[key]
        lease = self._lease()
        if not lease:
            return 0
        driver = await self._store.take_driver(rollout.group, rollout.policy, self._host, lease)
        if driver:
            self._drivers[key] = driver
        return driver

    async def _write(
        self, stored: StoredRollout, moved: Rollout, driver: int
    ) -> StoredRollout | None:
        # Stamped with who wrote it and when: `fleet status` shows both.
        moved = replace(moved, driver=self._host, updated_at=self._clock.wall().isoformat())
        written = await self._store.write(stored, moved, driver)
        rollout = stored.rollout
        if written is None:
            # Another governor holds the rollout now, or it moved on: stop driving it here.
            self._drivers.pop((rollout.group, rollout.policy), None)
            log.info("rollout swap lost", extra={"group": rollout.group, "policy": rollout.policy})
            return None
        for line in moved.history[len(rollout.history) :]:
            log.info(
                "rollout moved",
                extra={"group": rollout.group, "policy": rollout.policy, "line": line},
            )
        self._moved(moved)
        return written
