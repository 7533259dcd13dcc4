"""Governors of a group change's rollout, in process, over a real etcd and recorded servers.

Each :class:`FleetGovernor` is what the daemon runs for a rollout: a lease with its instance's
record, a :class:`RolloutDriver`, a :class:`RolloutMember` (looking every 50 ms) and the
:class:`RolloutThread` that posts its driver's lines through ``post``. The servers are one
shared recording double (:class:`Servers`): a change takes a little time, counts what runs at
once in the group, and a server running :data:`BAD_SEQS` answers worse counts, so that a
canary passes or fails on its own figures. A governor that dies is its tasks cancelled and its
lease revoked (what etcd does to a kill -9'd governor's lease once its TTL has passed).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import UTC, datetime

from daemon.fleet.canary_analysis import ServerCounts
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.member_resume import Standing
from daemon.fleet.records import MemberRecord
from daemon.fleet.rollout_driver import RolloutDriver
from daemon.fleet.rollout_member import MemberOutcome, RolloutMember
from daemon.fleet.rollout_state import Rollout
from daemon.fleet.rollout_store import RolloutStore
from daemon.fleet.rollout_thread import Post, RolloutThread

BAD_SEQS = 8.0
GROUP = "llama"


class Clock:
    """The system's clocks (the rollout's windows are wall time)."""

    def monotonic(self) -> float:
        """The monotonic clock."""
        return time.monotonic()

    def wall(self) -> datetime:
        """The wall clock."""
        return datetime.now(UTC)


class Servers:
    """Every member's server: its knob values, its changes, how many change at once."""

    def __init__(self, members: tuple[str, ...]) -> None:
        self.values = {member: {"max_num_seqs": 64.0} for member in members}
        self.changes: list[tuple[str, float]] = []
        self.changing = 0
        self.most_changing = 0


class Actions:
    """One host's MemberActions over the shared servers."""

    def __init__(self, servers: Servers, host: str) -> None:
        self._servers = servers
        self._host = host

    async def change(
        self, instance: str, policy: str, values: Mapping[str, float], reason: str
    ) -> MemberOutcome:
        """Change the server, taking a little time as a restart does."""
        member = f"{self._host}/{instance}"
        servers = self._servers
        previous = dict(servers.values[member])
        servers.changing += 1
        servers.most_changing = max(servers.most_changing, servers.changing)
        try:
            await asyncio.sleep(0.1)  # the restart
        finally:
            servers.changing -= 1
        servers.values[member] = dict(values)
        servers.changes.append((member, values["max_num_seqs"]))
        return MemberOutcome(True, f"done ({reason})", previous)

    def standing(self, instance: str, policy: str, since: datetime | None) -> Standing:
        """The server's values; no journal here: no change open, none finished."""
        return Standing(knobs=dict(self._servers.values[f"{self._host}/{instance}"]))

    async def counts(
        self, instance: str, since: datetime, until: datetime, ttft_slo_s: float
    ) -> ServerCounts:
        """300 requests over 30 s: 285 within the SLO, or 200 on the bad value."""
        bad = self._servers.values[f"{self._host}/{instance}"]["max_num_seqs"] == BAD_SEQS
        return ServerCounts(instance, 300, 200 if bad else 285, 0, 30)


class FleetGovernor:
    """One governor's rollout tasks, instance ``main`` in group :data:`GROUP`."""

    def __init__(
        self, client: EtcdGateway, keys: FleetKeys, servers: Servers, host: str, post: Post
    ) -> None:
        self.host = host
        self.client = client
        self.keys = keys
        self.lease = 0
        self.store = RolloutStore(client, keys)
        self.moves: list[Rollout] = []
        written: asyncio.Queue[Rollout] = asyncio.Queue()

        def moved(rollout: Rollout) -> None:
            self.moves.append(rollout)
            written.put_nowait(rollout)

        self.driver = RolloutDriver(
            self.store,
            host=host,
            lease=lambda: self.lease,
            slots_of=lambda group, size: 1,
            clock=Clock(),
            poll_s=0.05,
            moved=moved,
        )
        self.thread = RolloutThread(self.store, host=host, moves=written, post=post)
        self.member = RolloutMember(
            self.store,
            host=host,
            instances=lambda: ["main"],
            actions=Actions(servers, host),
            clock=Clock(),
            poll_s=0.05,
        )
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Register, then run the driver, the member and the thread."""
        self.lease = await self.client.grant(30)
        record = MemberRecord(self.host, "main", GROUP, "0.33.0", {}, "up")
        await self.client.put(
            self.keys.member(self.host, "main"), record.to_json(), lease=self.lease
        )
        self.tasks = [
            asyncio.create_task(self.driver.run(lambda: None), name=f"{self.host} driver"),
            asyncio.create_task(self.member.run(lambda: None), name=f"{self.host} member"),
            asyncio.create_task(self.thread.run(lambda: None), name=f"{self.host} thread"),
        ]

    async def die(self) -> None:
        """Stop at once, and lose the lease."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.client.revoke(self.lease)

    async def stop(self) -> None:
        """The end of the test (as a death: nothing here needs a graceful stop)."""
        await self.die()


async def until_finished(
    store: RolloutStore, policy: str, timeout_s: float = 20, group: str = GROUP
) -> Rollout:
    """The rollout of ``policy`` once it has finished."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stored = await store.read(group, policy)
        if stored is not None and stored.rollout.phase.finished:
            return stored.rollout
        await asyncio.sleep(0.05)
    message = "the rollout did not finish"
    raise AssertionError(message)
