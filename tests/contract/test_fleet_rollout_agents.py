"""Group rollouts driven through a real etcd: four governors' drivers and members, in process.

The governors are :class:`~tests.support.rollout_fleet.FleetGovernor`: each a lease with its
instance's record, the rollout's driver and member sides and the thread that posts its
driver's lines (here into a shared list of who posted what: the Slack side is the approvals
plane's, tested with the Slack double in ``tests/engine/test_fleet_rollout_thread.py``), over
one shared recording double of the servers, on which a canary passes or fails on its own
figures.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from daemon.fleet.canary_analysis import CanaryRule
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.rollout_lines import thread_lines
from daemon.fleet.rollout_state import Phase, Rollout, abort, approve, propose
from daemon.fleet.rollout_store import RolloutStore
from tests.support.etcd import EtcdCluster
from tests.support.rollout_fleet import BAD_SEQS, FleetGovernor, Servers, until_finished

pytestmark = pytest.mark.service("etcd")
KEYS = FleetKeys("/agents/")
HOSTS = ("h1", "h2", "h3", "h4")
MEMBERS = tuple(f"{host}/main" for host in HOSTS)
RULE = CanaryRule(window_s=1.0, min_requests=20)
PROPOSAL = "p-llama-1"
THREAD = ("C0APPROVALS", "1700000000.000100")


class Thread:
    """The proposal's thread as every governor's RolloutThread posts into it."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, str]] = []  # (host, text)

    def poster(self, host: str) -> Callable[[Rollout, str], Awaitable[bool]]:
        async def post(rollout: Rollout, text: str) -> bool:
            assert (rollout.proposal, rollout.thread) == (PROPOSAL, THREAD)
            self.posts.append((host, text))
            return True

        return post


async def _fleet(client: EtcdGateway, servers: Servers, thread: Thread) -> list[FleetGovernor]:
    governors = [FleetGovernor(client, KEYS, servers, host, thread.poster(host)) for host in HOSTS]
    for governor in governors:
        await governor.start()
    return governors


async def _until_finished(store: RolloutStore) -> Rollout:
    return await until_finished(store, "shrink")


async def _approve(governor: FleetGovernor) -> None:
    decided = await governor.driver.decide(
        "llama", "shrink", "ops", approved=True, proposal=PROPOSAL, thread=THREAD
    )
    assert decided == ""


async def _claims(client: EtcdGateway, final: Rollout) -> dict[str, str]:
    """Each line of the final rollout's thread and who claimed it, once all are claimed."""
    expected = {line.key for line in thread_lines(final)}
    prefix = f"{KEYS.rollout_lines('llama', 'shrink')}{PROPOSAL}/"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = await client.get_prefix(prefix)
        claims = {kv.key.removeprefix(prefix): json.loads(kv.value)["host"] for kv in found}
        if set(claims) == expected:
            return claims
        await asyncio.sleep(0.05)
    raise AssertionError(f"lines claimed: {sorted(claims)}, expected {sorted(expected)}")


async def _proposed(store: RolloutStore, seqs: float) -> None:
    rollout = propose("llama", "shrink", {"max_num_seqs": seqs}, MEMBERS, "h2/main", rule=RULE)
    assert (await store.propose(rollout)).created


def test_a_passing_canary_is_rolled_to_the_rest_one_at_a_time(tmp_path: Path) -> None:
    async def scenario(client: EtcdGateway) -> None:
        servers, thread = Servers(MEMBERS), Thread()
        store = RolloutStore(client, KEYS)
        governors = await _fleet(client, servers, thread)
        try:
            await _proposed(store, 48.0)
            await _approve(governors[1])
            final = await _until_finished(store)
            claims = await _claims(client, final)
        finally:
            for governor in governors:
                await governor.stop()
        assert final.phase is Phase.DONE
        # The thread: every step once, in order, posted by the driver alone.
        assert thread.posts == [("h2", line.text) for line in thread_lines(final)]
        assert set(claims.values()) == {"h2"}
        assert "Canary analysis over 1 s (TTFT SLO 2 s): *passed*" in thread.posts[2][1]
        assert thread.posts[-1][1].startswith(":white_check_mark: Rolled out: all 4 members")
        assert (final.driver, final.proposal, final.thread) == ("h2", PROPOSAL, THREAD)
        assert final.started_at <= final.updated_at
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
        servers, thread = Servers(MEMBERS), Thread()
        store = RolloutStore(client, KEYS)
        governors = await _fleet(client, servers, thread)
        try:
            await _proposed(store, BAD_SEQS)
            await _approve(governors[0])
            final = await _until_finished(store)
            await _claims(client, final)
        finally:
            for governor in governors:
                await governor.stop()
        assert final.phase is Phase.ABORTED
        # The evidence in the thread: the failed analysis, the revert, the rollout stopped.
        assert thread.posts == [("h1", line.text) for line in thread_lines(final)]
        analysis = next(text for _, text in thread.posts if text.startswith("Canary analysis"))
        assert analysis.splitlines()[:3] == [
            "Canary analysis over 1 s (TTFT SLO 2 s): *failed*",
            "• canary h2/main: 300 requests, SLO attainment 66.7%, goodput 6.67 req/s per server,"
            " errors 0.0%",
            "• baseline, 3 unchanged member(s): 900 requests, SLO attainment 95.0%,"
            " goodput 9.50 req/s per server, errors 0.0%",
        ]
        assert thread.posts[-1][1].startswith(":leftwards_arrow_with_hook: Rolled back")
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
        servers, thread = Servers(MEMBERS), Thread()
        store = RolloutStore(client, KEYS)
        governors = await _fleet(client, servers, thread)
        driver = governors[3]  # h4: its own server is changed last, so it dies mid-way
        try:
            await _proposed(store, 48.0)
            await _approve(driver)
            while not any(m.phase is Phase.ROLLING and m.steps for m in driver.moves):
                await asyncio.sleep(0.02)
            while len(servers.changes) < 2:  # the canary and the first member: mid-way
                await asyncio.sleep(0.02)
            await driver.die()
            posted_before = len(thread.posts)
            final = await _until_finished(store)
            claims = await _claims(client, final)
        finally:
            for governor in governors[:3]:
                await governor.stop()
        # The thread: no line twice. Each line was claimed once in etcd, and whoever claimed
        # it posted it (a claim the killed driver made but never posted is lost, not repeated);
        # the lines after its death come from the one governor that took over.
        texts = {line.key: line.text for line in thread_lines(final)}
        assert max(Counter(text for _, text in thread.posts).values()) == 1, thread.posts
        assert {(claims[key], text) for key, text in texts.items() if claims[key] != "h4"} <= set(
            thread.posts
        )
        assert set(thread.posts) <= {(claims[key], text) for key, text in texts.items()}
        successor = {host for host, _ in thread.posts[posted_before:]}
        assert len(successor) == 1
        assert successor != {"h4"}
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


def test_a_driver_that_died_as_its_rollout_ended_tells_the_rest_when_it_starts_again(
    tmp_path: Path,
) -> None:
    async def scenario(client: EtcdGateway) -> None:
        thread = Thread()
        store = RolloutStore(client, KEYS)
        await _proposed(store, 48.0)
        stored = await store.read("llama", "shrink")
        assert stored is not None
        # h2 drove it to its end, wrote that, and died before its thread task told anything.
        approved = approve(stored.rollout, "ops", proposal=PROPOSAL, thread=THREAD)
        ended = replace(abort(approved, "stopped by hand"), driver="h2")
        lease = await client.grant(30)
        key = await store.take_driver("llama", "shrink", "h2", lease)
        assert await store.write(stored, ended, key) is not None
        await client.revoke(lease)
        servers = Servers(MEMBERS)
        for host in ("h3", "h2", "h2"):  # another governor, h2 started again, and once more
            governor = FleetGovernor(client, KEYS, servers, host, thread.poster(host))
            await governor.thread.catch_up()
        assert thread.posts == [("h2", line.text) for line in thread_lines(ended)]

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))
