"""Group rollouts driven through a real etcd: four governors' drivers and members, in process.

Each governor is what the daemon runs for a rollout: a lease with its instance's record, a
:class:`RolloutDriver` and a :class:`RolloutMember`, looking every 50 ms. The servers are a
shared recording double (:class:`Servers`): a change takes a little time, counts what runs at
once in the group, and a server running the "bad" value answers worse counts, so a canary can
pass or fail on its own figures. A governor that dies is its tasks cancelled and its lease
revoked (what etcd does to a kill -9'd governor's lease once its TTL has passed).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.fleet.canary_analysis import CanaryRule, ServerCounts
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.records import MemberRecord
from daemon.fleet.rollout_driver import RolloutDriver
from daemon.fleet.rollout_member import MemberOutcome, RolloutMember
from daemon.fleet.rollout_state import Phase, Rollout, propose
from daemon.fleet.rollout_store import RolloutStore
from tests.support.etcd import EtcdCluster

pytestmark = pytest.mark.service("etcd")
KEYS = FleetKeys("/agents/")
HOSTS = ("h1", "h2", "h3", "h4")
MEMBERS = tuple(f"{host}/main" for host in HOSTS)
RULE = CanaryRule(window_s=1.0, min_requests=20)
BAD_SEQS = 8.0


class Clock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(UTC)


class Servers:
    """Every host's server: its knob values, its changes, how many change at once."""

    def __init__(self) -> None:
        self.values = {member: {"max_num_seqs": 64.0} for member in MEMBERS}
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

    async def counts(
        self, instance: str, since: datetime, until: datetime, ttft_slo_s: float
    ) -> ServerCounts:
        bad = self._servers.values[f"{self._host}/{instance}"]["max_num_seqs"] == BAD_SEQS
        return ServerCounts(instance, 300, 200 if bad else 285, 0, 30)


class Governor:
    def __init__(self, client: EtcdGateway, servers: Servers, host: str) -> None:
        self.host = host
        self.client = client
        self.lease = 0
        store = RolloutStore(client, KEYS)
        self.moves: list[Rollout] = []
        self.driver = RolloutDriver(
            store,
            host=host,
            lease=lambda: self.lease,
            slots_of=lambda group, size: 1,
            clock=Clock(),
            poll_s=0.05,
            moved=self.moves.append,
        )
        self.member = RolloutMember(
            store,
            host=host,
            instances=lambda: ["main"],
            actions=Actions(servers, host),
            clock=Clock(),
            poll_s=0.05,
        )
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self.lease = await self.client.grant(30)
        record = MemberRecord(self.host, "main", "llama", "0.33.0", {}, "up")
        await self.client.put(KEYS.member(self.host, "main"), record.to_json(), lease=self.lease)
        self.tasks = [
            asyncio.create_task(self.driver.run(lambda: None), name=f"{self.host} driver"),
            asyncio.create_task(self.member.run(lambda: None), name=f"{self.host} member"),
        ]

    async def die(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.client.revoke(self.lease)

    async def stop(self) -> None:
        await self.die()


async def _fleet(client: EtcdGateway, servers: Servers) -> list[Governor]:
    governors = [Governor(client, servers, host) for host in HOSTS]
    for governor in governors:
        await governor.start()
    return governors


async def _until_finished(store: RolloutStore, timeout_s: float = 20) -> Rollout:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stored = await store.read("llama", "shrink")
        if stored is not None and stored.rollout.phase.finished:
            return stored.rollout
        await asyncio.sleep(0.05)
    raise AssertionError("the rollout did not finish")


async def _proposed(store: RolloutStore, seqs: float) -> None:
    rollout = propose("llama", "shrink", {"max_num_seqs": seqs}, MEMBERS, "h2/main", rule=RULE)
    assert (await store.propose(rollout)).created


def test_a_passing_canary_is_rolled_to_the_rest_one_at_a_time(tmp_path: Path) -> None:
    async def scenario(client: EtcdGateway) -> None:
        servers = Servers()
        store = RolloutStore(client, KEYS)
        governors = await _fleet(client, servers)
        try:
            await _proposed(store, 48.0)
            assert await governors[1].driver.decide("llama", "shrink", "ops", approved=True) == ""
            final = await _until_finished(store)
        finally:
            for governor in governors:
                await governor.stop()
        assert final.phase is Phase.DONE
        assert servers.changes[0] == ("h2/main", 48.0)  # the canary first
        assert sorted(servers.changes) == [(member, 48.0) for member in MEMBERS]  # each once
        assert servers.most_changing == 1  # max_unavailable 1
        assert final.verdict is not None
        assert final.verdict.passed
        assert final.verdict.baseline.servers == 3
        assert final.verdict.canary.slo_attainment == pytest.approx(0.95)

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))


def test_a_failing_canary_is_reverted_and_the_rollout_stops(tmp_path: Path) -> None:
    async def scenario(client: EtcdGateway) -> None:
        servers = Servers()
        store = RolloutStore(client, KEYS)
        governors = await _fleet(client, servers)
        try:
            await _proposed(store, BAD_SEQS)
            assert await governors[0].driver.decide("llama", "shrink", "ops", approved=True) == ""
            final = await _until_finished(store)
        finally:
            for governor in governors:
                await governor.stop()
        assert final.phase is Phase.ABORTED
        assert servers.changes == [("h2/main", BAD_SEQS), ("h2/main", 64.0)]  # reverted
        assert final.verdict is not None
        assert not final.verdict.passed
        assert final.verdict.failures == (
            "SLO attainment 28.3 points lower (at most 5)",
            "goodput 29.8% lower (at most 10%)",
        )
        assert any(
            line.startswith("canary failed: SLO attainment 66.7% vs 95.0%")
            for line in final.history
        )
        assert (
            final.history[-1]
            == "h2/main: revert done (done (shrink: rollout over group llama (canary reverted)))"
        )

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))


def test_when_the_driver_dies_mid_rollout_exactly_one_other_takes_over(tmp_path: Path) -> None:
    async def scenario(client: EtcdGateway) -> None:
        servers = Servers()
        store = RolloutStore(client, KEYS)
        governors = await _fleet(client, servers)
        driver = governors[3]  # h4: its own server is changed last, so it dies mid-way
        try:
            await _proposed(store, 48.0)
            assert await driver.driver.decide("llama", "shrink", "ops", approved=True) == ""
            while not any(m.phase is Phase.ROLLING and m.steps for m in driver.moves):
                await asyncio.sleep(0.02)
            while len(servers.changes) < 2:  # the canary and the first member: mid-way
                await asyncio.sleep(0.02)
            await driver.die()
            final = await _until_finished(store)
        finally:
            for governor in governors[:3]:
                await governor.stop()
        took_over = [line for line in final.history if line.startswith("driven by")]
        assert len(took_over) == 1, final.history
        assert not took_over[0].startswith("driven by h4")
        members_changed = [member for member, _ in servers.changes]
        assert len(members_changed) == len(set(members_changed))  # no double restart
        assert servers.most_changing == 1
        # h4's server has nobody to change it now: the new driver aborts when it is asked.
        assert final.phase is Phase.ABORTED
        assert final.history[-1] == "aborted: h4/main no longer registered: nobody to act"
        assert set(members_changed) == {"h1/main", "h2/main", "h3/main"}

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))
