"""The fleet registrar against a real etcd: writes what changed, survives a lost lease."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.records import MemberRecord
from daemon.fleet.registrar import Registrar
from tests.support.etcd import EtcdCluster

pytestmark = pytest.mark.service("etcd")
KEYS = FleetKeys("/t/")
START = datetime(2026, 12, 1, tzinfo=UTC)


class FixedClock:
    """A clock that stands still: the registrar reads the wall only for ``since``."""

    def monotonic(self) -> float:
        return 0.0

    def wall(self) -> datetime:
        return START


def test_records_follow_the_facts_and_a_lost_lease_is_replaced(tmp_path: Path) -> None:
    facts = [
        MemberRecord("h", "a", "g", "0.33.0", {"max_num_seqs": 64}, "up"),
        MemberRecord("h", "b", "g", "0.33.0", {}, "up"),
    ]

    async def scenario(client: EtcdGateway) -> None:
        registrar = Registrar(
            client,
            KEYS,
            ttl_s=30,
            refresh_s=1,
            facts=lambda: facts,
            clock=FixedClock(),
        )
        await registrar.refresh()
        assert registrar.reachable
        stored = await client.get_prefix(KEYS.members)
        assert [kv.key for kv in stored] == ["/t/members/h/a", "/t/members/h/b"]
        assert {kv.lease for kv in stored} == {registrar.lease}
        first = MemberRecord.from_json(stored[0].value)
        assert first.knobs == {"max_num_seqs": 64}
        assert first.since == "2026-12-01T00:00:00+00:00"

        facts[0] = MemberRecord("h", "a", "g", "0.33.0", {"max_num_seqs": 48}, "down")
        del facts[1]  # an instance no longer configured
        await registrar.refresh()
        stored = await client.get_prefix(KEYS.members)
        assert [kv.key for kv in stored] == ["/t/members/h/a"]
        assert MemberRecord.from_json(stored[0].value).health == "down"

        old = registrar.lease
        await client.revoke(old)  # as if renewals were lost for longer than the TTL
        assert await client.get_prefix(KEYS.members) == []
        await registrar.refresh()
        stored = await client.get_prefix(KEYS.members)
        assert [kv.key for kv in stored] == ["/t/members/h/a"]
        assert registrar.lease not in (0, old)
        assert stored[0].lease == registrar.lease

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))


def test_an_unreachable_etcd_is_a_state_not_an_error(tmp_path: Path) -> None:
    async def scenario(cluster: EtcdCluster, client: EtcdGateway) -> None:
        registrar = Registrar(
            client,
            KEYS,
            ttl_s=30,
            refresh_s=1,
            facts=lambda: [MemberRecord("h", "a", "g", "", {}, "up")],
            clock=FixedClock(),
        )
        await registrar.refresh()
        assert registrar.reachable
        cluster.stop_member(0)
        await registrar.refresh()
        assert _reachable(registrar) is False  # read afresh: mypy narrowed it above
        assert "no etcd member answered" in registrar.last_error
        cluster.start_member(0)
        await registrar.refresh()
        assert registrar.reachable
        assert [kv.key for kv in await client.get_prefix(KEYS.members)] == ["/t/members/h/a"]

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(cluster, EtcdGateway(cluster.endpoints, timeout_s=3)))


def _reachable(registrar: Registrar) -> bool | None:
    return registrar.reachable
