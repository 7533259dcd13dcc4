"""The fleet's etcd client against a real etcd 3.4: the calls the fleet needs, and failover."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from daemon.fleet.errors import EtcdUnavailable
from daemon.fleet.etcd_gateway import EtcdGateway
from tests.support.etcd import EtcdCluster
from tests.support.services import free_port

pytestmark = pytest.mark.service("etcd")


async def _value(client: EtcdGateway, key: str) -> bytes | None:
    found = await client.get(key)
    return None if found is None else found.value


def test_keys_prefixes_and_a_create_only_transaction(tmp_path: Path) -> None:
    async def scenario(client: EtcdGateway) -> None:
        await client.put("/f/members/a", b'{"x": 1}')
        await client.put("/f/members/b", b"two")
        await client.put("/f/other", b"three")
        assert await _value(client, "/f/members/a") == b'{"x": 1}'
        assert await client.get("/f/missing") is None
        assert [kv.key for kv in await client.get_prefix("/f/members/")] == [
            "/f/members/a",
            "/f/members/b",
        ]
        assert await client.create("/f/slot", b"me")
        assert not await client.create("/f/slot", b"someone else")
        assert await _value(client, "/f/slot") == b"me"
        assert await client.delete("/f/slot") == 1
        assert await client.delete("/f/slot") == 0

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))


def test_a_lease_holds_its_keys_until_revoked(tmp_path: Path) -> None:
    async def scenario(client: EtcdGateway) -> None:
        lease = await client.grant(30)
        await client.put("/f/members/me", b"here", lease=lease)
        assert await client.keep_alive(lease) == 30
        found = await client.get("/f/members/me")
        assert found is not None
        assert found.lease == lease
        await client.revoke(lease)
        assert await client.get("/f/members/me") is None
        assert await client.keep_alive(lease) == 0  # gone: the caller must register again
        await client.revoke(lease)  # revoking twice is no error

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))


def test_a_dead_member_is_passed_over_and_a_lost_majority_is_unavailable(tmp_path: Path) -> None:
    with EtcdCluster(tmp_path, size=3) as cluster:
        client = EtcdGateway(cluster.endpoints, timeout_s=3)
        asyncio.run(client.put("/f/k", b"1"))
        cluster.stop_member(0, kill=True)  # the member the client prefers
        asyncio.run(client.put("/f/k", b"2"))
        assert asyncio.run(_value(client, "/f/k")) == b"2"

        cluster.stop_member(1, kill=True)  # one of three left: no quorum
        cluster.wait_unhealthy([cluster.members[2]])
        with pytest.raises(EtcdUnavailable, match="no etcd member answered"):
            asyncio.run(client.put("/f/k", b"3"))

        cluster.start_member(1)
        cluster.wait_healthy([cluster.members[1], cluster.members[2]])
        # A write that timed out is not a write that failed: the surviving member may have
        # taken it into its log, and the returning majority commits it (seen in about half the
        # runs). Callers treat "unavailable" as "unknown", never as "not done".
        assert asyncio.run(_value(client, "/f/k")) in (b"2", b"3")


def test_nothing_listening_is_unavailable() -> None:
    client = EtcdGateway([f"http://127.0.0.1:{free_port()}"], timeout_s=2)
    with pytest.raises(EtcdUnavailable, match="refused"):
        asyncio.run(client.get("/f/k"))
