"""The rollout's lines in its proposal's Slack thread, posted by the governor driving it, once.

The driver hands every state it writes to this task (:class:`RolloutThread`, through the
fleet's queue of moves), so only the governor driving a rollout posts, and only what it
wrote. Each line (:func:`~daemon.fleet.rollout_lines.thread_lines`) is claimed in etcd before
it is posted (:meth:`~daemon.fleet.rollout_store.RolloutStore.claim_line`, create-only, bound
to no lease): a driver that resumes a dead one's rollout posts the lines its predecessor had
not claimed, and none twice. A claimed line whose post failed is not posted again (at most
once, as the approvals' own thread replies: the rollout's history in etcd keeps every line).

etcd unreachable at a claim: nothing is posted for that state; the next state the driver
writes brings the lines again.

A rollout that finished just as its driver died has nobody to drive it any more: when that
governor starts again (the same host), it posts the lines of the finished rollouts it wrote
last that nobody claimed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from daemon.fleet.errors import FleetError
from daemon.fleet.rollout_lines import thread_lines
from daemon.fleet.rollout_state import Rollout, RolloutMoveError
from daemon.fleet.rollout_store import RolloutStore

log = logging.getLogger(__name__)

Post = Callable[[Rollout, str], Awaitable[bool]]  # reply in the rollout's thread; False: not sent


class RolloutThread:
    """Posts the lines of the rollouts this governor drives.

    Args:
        store: The rollouts in etcd (where each line is claimed).
        host: This governor's name in the fleet.
        moves: Every rollout state this governor's driver wrote.
        post: Replies in the thread of the rollout's proposal.
    """

    def __init__(
        self, store: RolloutStore, *, host: str, moves: asyncio.Queue[Rollout], post: Post
    ) -> None:
        self._store = store
        self._host = host
        self._moves = moves
        self._post = post
        self._told: set[tuple[str, str, str, str]] = set()  # group, policy, proposal, line key

    async def run(self, started: Callable[[], None]) -> None:
        """Tell what an earlier run left, then each written state's new lines until cancelled."""
        started()
        try:
            await self.catch_up()
        except (FleetError, RolloutMoveError) as exc:
            log.warning("finished rollouts not read", extra={"error": str(exc)})
        while True:
            rollout = await self._moves.get()
            try:
                await self.tell(rollout)
            except FleetError as exc:
                log.warning(
                    "rollout lines not claimed; the next state brings them again",
                    extra={"group": rollout.group, "policy": rollout.policy, "error": str(exc)},
                )

    async def catch_up(self) -> None:
        """Post the unclaimed lines of the finished rollouts this host wrote last."""
        for stored in await self._store.read_all():
            rollout = stored.rollout
            if rollout.phase.finished and rollout.driver == self._host:
                await self.tell(rollout)

    async def tell(self, rollout: Rollout) -> None:
        """Post every line of ``rollout`` not yet claimed by anyone."""
        lines = thread_lines(rollout)
        for line in lines:
            told = (rollout.group, rollout.policy, rollout.proposal, line.key)
            if told in self._told:
                continue
            if await self._store.claim_line(rollout, line.key, self._host):
                sent = await self._post(rollout, line.text)
                log.info(
                    "rollout line posted" if sent else "rollout line not sent",
                    extra={"group": rollout.group, "policy": rollout.policy, "line": line.key},
                )
            self._told.add(told)
        if rollout.phase.finished:
            # Nothing more comes for this rollout: forget its lines (etcd keeps the claims).
            self._told -= {(rollout.group, rollout.policy, rollout.proposal, x.key) for x in lines}
