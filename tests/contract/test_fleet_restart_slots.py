"""The disruption budget against a real etcd: restart slots per group, bound to leases.

Governors here are registrars with leases of their own (what a governor process holds); the
last test puts the slots in front of the real vLLM actuator over supervisord and ``sim serve``.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from actuators.vllm.actuator import VllmActuator
from daemon.api import DONE, REFUSED, ChangeRequest, SystemClock, VllmInstance
from daemon.core.fleet_settings import Budget, budget_slots
from daemon.engine.storage.journal_store import SqliteJournal
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.reading import read_fleet
from daemon.fleet.records import MemberRecord
from daemon.fleet.registrar import Registrar
from daemon.fleet.restart_slots import FleetRestartSlots
from tests.support.etcd import EtcdCluster
from tests.support.live_windows import live_windows
from tests.support.supervised_sim import supervised_sim

pytestmark = pytest.mark.service("etcd")
KEYS = FleetKeys("/t/")


class Clock:
    """Real time: the slot wait is short and real (the test bounds it, never asserts it)."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(UTC)


class Governor:
    """One governor of the fleet: its registration (a lease) and its side of the slots."""

    def __init__(
        self, client: EtcdGateway, host: str, instances: list[str], budget: Budget, wait_s: float
    ) -> None:
        records = [MemberRecord(host, name, "llama", "0.33.0", {}, "up") for name in instances]
        self.registrar = Registrar(
            client, KEYS, ttl_s=30, refresh_s=1, facts=lambda: records, clock=Clock()
        )
        self.slots = FleetRestartSlots(
            client,
            KEYS,
            host=host,
            lease=lambda: self.registrar.lease,
            group_of=lambda instance: "llama",
            budget_of=lambda group: budget,
            wait_s=wait_s,
            poll_s=0.1,
            clock=Clock(),
        )


@pytest.mark.parametrize(
    ("budget", "members", "slots"),
    [(1, 8, 1), (2, 8, 2), ("25%", 8, 2), ("25%", 7, 2), ("10%", 3, 1), ("100%", 3, 3)],
)
def test_a_budget_is_a_count_or_a_share_rounded_up(
    budget: Budget, members: int, slots: int
) -> None:
    assert budget_slots(budget, members) == slots


def test_one_slot_is_held_by_one_governor_and_freed_by_release_or_by_its_lease(
    tmp_path: Path,
) -> None:
    async def scenario(client: EtcdGateway) -> None:
        a = Governor(client, "host-a", ["main"], budget=1, wait_s=0.5)
        b = Governor(client, "host-b", ["main"], budget=1, wait_s=0.5)
        await a.registrar.refresh()
        await b.registrar.refresh()

        assert await a.slots.acquire("main") == ""
        assert await a.slots.acquire("main") == ""  # held already: the same slot, not a second
        assert [kv.key for kv in await client.get_prefix(KEYS.all_slots)] == ["/t/slots/llama/0"]
        shown = (await read_fleet(client, KEYS)).slots  # what `fleet status` prints
        assert [(slot.key, slot.holder, slot.lease) for slot in shown] == [
            ("llama/0", "host-a/main", a.registrar.lease)
        ]
        refused = await b.slots.acquire("main")
        assert refused.startswith("no restart slot free in group llama (max_unavailable 1: ")
        assert "held by host-a/main)" in refused
        assert refused.endswith("waited 0.5 s (slot_wait_s)")

        await a.slots.release("main")
        assert await b.slots.acquire("main") == ""

        # b dies holding its slot (kill -9): nobody releases it; its lease ends it.
        await client.revoke(b.registrar.lease)
        assert await a.slots.acquire("main") == ""

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))


def test_a_waiting_restart_takes_the_slot_as_soon_as_it_frees(tmp_path: Path) -> None:
    async def scenario(client: EtcdGateway) -> None:
        a = Governor(client, "host-a", ["main"], budget=1, wait_s=30)
        b = Governor(client, "host-b", ["main"], budget=1, wait_s=30)
        await a.registrar.refresh()
        await b.registrar.refresh()
        assert await a.slots.acquire("main") == ""
        waiting = asyncio.create_task(b.slots.acquire("main"))
        await asyncio.sleep(0.3)  # b is polling now
        assert not waiting.done()
        await a.slots.release("main")
        assert await asyncio.wait_for(waiting, timeout=10) == ""

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))


def test_a_share_counts_the_registered_replicas_and_an_unseen_fleet_refuses(
    tmp_path: Path,
) -> None:
    async def scenario(cluster: EtcdCluster, client: EtcdGateway) -> None:
        a = Governor(client, "host-a", ["r1", "r2", "r3", "r4"], budget="50%", wait_s=0.2)
        await a.registrar.refresh()
        assert await a.slots.acquire("r1") == ""
        assert await a.slots.acquire("r2") == ""
        refused = await a.slots.acquire("r3")
        assert "(max_unavailable 50%: 2 slot(s); held by host-a/r1, host-a/r2)" in refused

        unregistered = Governor(client, "host-z", ["main"], budget=1, wait_s=0.2)
        assert "this governor is not registered yet" in await unregistered.slots.acquire("main")

        cluster.stop_member(0)
        refused = await a.slots.acquire("r4")
        assert refused.startswith("no restart slot of group llama: the fleet cannot be read (")
        assert refused.endswith("no restart while a fleet is configured and cannot be seen")

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(cluster, EtcdGateway(cluster.endpoints, timeout_s=2)))


def test_a_slot_taken_unseen_is_given_back_by_the_keeper(tmp_path: Path) -> None:
    async def scenario(cluster: EtcdCluster, client: EtcdGateway) -> None:
        a = Governor(client, "host-a", ["main", "other"], budget=2, wait_s=0.2)
        await a.registrar.refresh()
        assert await a.slots.acquire("main") == ""  # a restart in progress: kept
        # A create whose answer was lost (etcd timed out, then committed it): a slot held
        # under a's lease that a does not know of.
        stray = f"{KEYS.slots('llama')}1"
        holder = b'{"host": "host-a", "instance": "other"}'
        assert await client.create(stray, holder, lease=a.registrar.lease)
        await a.slots.tidy()
        assert [kv.key for kv in await client.get_prefix(KEYS.all_slots)] == [
            f"{KEYS.slots('llama')}0"
        ]

        cluster.stop_member(0)  # an acquire that gets no answer leaves the keeper unsure
        assert "the fleet cannot be read" in await a.slots.acquire("other")
        assert a.slots.unsure
        cluster.start_member(0)
        await a.slots.tidy()
        assert not a.slots.unsure

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(cluster, EtcdGateway(cluster.endpoints, timeout_s=2)))


@pytest.mark.service("supervisord")
@pytest.mark.slow
def test_the_vllm_actuator_restarts_only_with_a_slot_and_gives_it_back(short_tmp: Path) -> None:
    async def scenario(instance: VllmInstance, client: EtcdGateway) -> None:
        here = Governor(client, "host-a", ["a1"], budget=1, wait_s=0.5)
        other = Governor(client, "host-b", ["a1"], budget=1, wait_s=0.5)
        await here.registrar.refresh()
        await other.registrar.refresh()
        journal = SqliteJournal(short_tmp / "state.sqlite3", SystemClock())
        change = ChangeRequest("a1", "test-policy", {"max_num_seqs": 16}, {"max_num_seqs": 8})
        async with live_windows(instance) as windows:
            actuator = VllmActuator(
                journal, windows, SystemClock(), short_tmp / "state", restart_slots=here.slots
            )
            assert await other.slots.acquire("a1") == ""  # another replica is restarting
            refused = await actuator.apply(instance, change)
            assert refused.state == REFUSED, refused.outcome
            assert "refused (restart_slot): no restart slot free in group llama" in refused.outcome
            assert "held by host-b/a1" in refused.outcome

            await other.slots.release("a1")
            done = await actuator.apply(instance, change)
            assert done.state == DONE, done.outcome
        assert await client.get_prefix(KEYS.all_slots) == []  # given back once verified
        journal.close()

    with (
        EtcdCluster(short_tmp / "etcd") as cluster,
        supervised_sim(short_tmp, "max-num-seqs: 8\n") as sim,
    ):
        instance = sim.instance()
        asyncio.run(scenario(instance, EtcdGateway(cluster.endpoints, 5)))
        assert sim.spawns() == 2  # one restart: the one with a slot
