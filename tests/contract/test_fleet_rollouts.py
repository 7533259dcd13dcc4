"""Group changes' rollouts against a real etcd: one proposal per group, one driver, CAS moves.

Governors here are leases of their own (what a governor process holds, granted directly);
a governor that dies is its lease revoked, which is what etcd does to a killed governor's lease
once its TTL passes.
"""

from __future__ import annotations

import asyncio
import functools
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.core.clock import SystemClock
from daemon.fleet.canary_analysis import ServerCounts
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.member_resume import Attempt, Standing
from daemon.fleet.rollout_driver import RolloutDriver
from daemon.fleet.rollout_member import MemberOutcome, RolloutMember
from daemon.fleet.rollout_state import (
    MemberReport,
    Phase,
    Rollout,
    Step,
    abort,
    approve,
    fold_report,
    propose,
)
from daemon.fleet.rollout_store import RolloutStore
from tests.support.etcd import EtcdCluster

pytestmark = pytest.mark.service("etcd")
KEYS = FleetKeys("/t/")
MEMBERS = tuple(f"h{n}/main" for n in range(1, 5))
T0 = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)


def _proposal(canary: str) -> Rollout:
    return propose("llama", "kv-thrash", {"max_num_seqs": 48}, MEMBERS, canary)


def test_a_group_proposal_is_made_once_whoever_proposes_at_the_same_time(
    tmp_path: Path,
) -> None:
    async def scenario(client: EtcdGateway) -> None:
        store = RolloutStore(client, KEYS)
        # Four governors, the policy firing on each member: each proposes with itself as canary.
        answers = await asyncio.gather(*(store.propose(_proposal(member)) for member in MEMBERS))
        assert sum(answer.created for answer in answers) == 1
        (made,) = [answer.stored for answer in answers if answer.created]
        assert all(answer.stored == made for answer in answers)  # the others see the one made

        # A live rollout stays the group's; a finished one is replaced by the next proposal.
        again = await store.propose(_proposal("h1/main"))
        assert not again.created
        driver = await store.take_driver("llama", "kv-thrash", "h1", await client.grant(30))
        finished = await store.write(made, abort(made.rollout, "test"), driver)
        assert finished is not None
        await store.report("llama", "kv-thrash", MemberReport("h1/main", Step.APPLY, True, ""))
        begun = Attempt("h1/main", Step.APPLY, {"max_num_seqs": 48}, {"max_num_seqs": 64}, T0)
        await store.begin("llama", "kv-thrash", begun)
        assert await store.attempt("llama", "kv-thrash", "h1/main") == begun
        replaced = await store.propose(_proposal("h3/main"))
        assert replaced.created
        assert replaced.stored.rollout.canary == "h3/main"
        assert await store.reports("llama", "kv-thrash") == []  # the old rollout's are gone
        # and so are its attempts: the new rollout's steps are acted on afresh
        assert await store.attempt("llama", "kv-thrash", "h1/main") is None

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))


def test_one_driver_moves_the_rollout_and_a_stale_state_writes_nothing(tmp_path: Path) -> None:
    async def scenario(client: EtcdGateway) -> None:
        store = RolloutStore(client, KEYS)
        made = (await store.propose(_proposal("h2/main"))).stored
        a_lease, b_lease = await client.grant(30), await client.grant(30)

        a = await store.take_driver("llama", "kv-thrash", "h1", a_lease)
        assert a > 0
        assert await store.take_driver("llama", "kv-thrash", "h1", a_lease) == a  # still a's
        assert await store.take_driver("llama", "kv-thrash", "h2", b_lease) == 0
        assert await store.driver("llama", "kv-thrash") == "h1"

        approved = await store.write(made, approve(made.rollout, "ops"), a)
        assert approved is not None
        assert approved.revision > made.revision
        # The same move from the state read before: the revision moved on, nothing is written.
        assert await store.write(made, approve(made.rollout, "someone"), a) is None
        # b never took the driver key: with a's state and b's (absent) driver, nothing either.
        assert await store.write(approved, abort(approved.rollout, "b"), 0) is None
        stored = await store.read("llama", "kv-thrash")
        assert stored == approved
        assert stored.rollout.history == ("approved by ops; canary h2/main asked to apply",)

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))


def test_when_the_driver_dies_exactly_one_other_governor_resumes_or_aborts(
    tmp_path: Path,
) -> None:
    async def scenario(client: EtcdGateway) -> None:
        store = RolloutStore(client, KEYS)
        made = (await store.propose(_proposal("h2/main"))).stored
        dead_lease = await client.grant(30)
        dead = await store.take_driver("llama", "kv-thrash", "h1", dead_lease)
        approved = await store.write(made, approve(made.rollout, "ops"), dead)
        assert approved is not None
        await client.revoke(dead_lease)  # the driver dies (its lease ends: kill -9 + TTL)
        assert await store.driver("llama", "kv-thrash") == ""
        # The dead driver's last write attempt (a stale process) is refused.
        assert await store.write(approved, abort(approved.rollout, "late"), dead) is None

        # Three survivors race: each reads, takes the driver key if it can, then moves.
        async def survivor(host: str, resume: bool) -> bool:
            lease = await client.grant(30)
            seen = await store.read("llama", "kv-thrash")
            assert seen is not None
            driver = await store.take_driver("llama", "kv-thrash", host, lease)
            if not driver:
                return False
            report = MemberReport("h2/main", Step.APPLY, ok=True, detail="done")
            moved = (
                fold_report(seen.rollout, report, "now")
                if resume
                else abort(seen.rollout, f"driver lost; {host} aborts")
            )
            return await store.write(seen, moved, driver) is not None

        acted = await asyncio.gather(
            survivor("h2", resume=True), survivor("h3", resume=False), survivor("h4", resume=True)
        )
        assert sum(acted) == 1
        final = await store.read("llama", "kv-thrash")
        assert final is not None
        assert final.rollout.phase in {Phase.ANALYSIS, Phase.ABORTED}  # resumed xor aborted
        assert len(final.rollout.history) == 2

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))


def test_the_driver_gives_the_key_back_only_while_it_is_its_own(tmp_path: Path) -> None:
    async def scenario(client: EtcdGateway) -> None:
        store = RolloutStore(client, KEYS)
        old_lease = await client.grant(30)
        old = await store.take_driver("llama", "kv-thrash", "h1", old_lease)
        await client.revoke(old_lease)
        new = await store.take_driver("llama", "kv-thrash", "h2", await client.grant(30))
        await store.release_driver("llama", "kv-thrash", old)  # a stale release: no effect
        assert await store.driver("llama", "kv-thrash") == "h2"
        await store.release_driver("llama", "kv-thrash", new)
        assert await store.driver("llama", "kv-thrash") == ""

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))


def test_a_governor_that_does_not_drive_a_live_rollout_writes_nothing_at_its_looks(
    tmp_path: Path,
) -> None:
    """Every governor looks at every live rollout each period; only its driver may write.

    Before, each look of each other governor tried the driver key with a create-only
    transaction, and etcd commits every transaction that may write through raft: during a
    rollout, one raft proposal per governor per period (bench/fleet_load.py: 0.9 per governor
    per period with 10 governors, 180 a second projected to 1,000).
    """

    async def scenario(client: EtcdGateway, endpoint: str) -> None:
        store = RolloutStore(client, KEYS)
        made = (await store.propose(_proposal("h2/main"))).stored
        lease = await client.grant(30)
        driving = await store.take_driver("llama", "kv-thrash", "h1", lease)
        assert await store.write(made, approve(made.rollout, "ops"), driving) is not None

        other = RolloutDriver(
            store,
            host="h3",
            lease=functools.partial(int, await client.grant(30)),
            slots_of=lambda _group, _size: 1,
            clock=SystemClock(),
            poll_s=5.0,
            moved=lambda _rollout: None,
        )
        before = _proposals_committed(endpoint)
        for _ in range(5):
            await other.look()
        assert _proposals_committed(endpoint) == before
        assert await store.driver("llama", "kv-thrash") == "h1"
        # The key, once the driver is gone, it still takes, and says that it resumed.
        await client.revoke(lease)
        await other.look()
        stored = await store.read("llama", "kv-thrash")
        assert stored is not None
        assert "driven by h3 (the previous driver is gone)" in stored.rollout.history

    with EtcdCluster(tmp_path) as cluster:
        endpoint = cluster.endpoints[0]
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5), endpoint))


def test_a_member_asked_nothing_by_a_live_rollout_reads_the_rollouts_alone(
    tmp_path: Path,
) -> None:
    """A member of a rollout in its analysis (asked nothing) reads one range per look.

    Before, it read the rollout's reports at every look too: two ranges per period for every
    governor of the group while the canary's window ran.
    """

    async def scenario(client: EtcdGateway, endpoint: str) -> None:
        store = RolloutStore(client, KEYS)
        made = (await store.propose(_proposal("h2/main"))).stored
        driving = await store.take_driver("llama", "kv-thrash", "h1", await client.grant(30))
        canary = MemberReport("h2/main", Step.APPLY, ok=True, detail="done")
        analysing = fold_report(approve(made.rollout, "ops"), canary, datetime.now(UTC).isoformat())
        assert await store.write(made, analysing, driving) is not None
        member = RolloutMember(
            store,
            host="h3",
            instances=lambda: ["main"],
            actions=NoActions(),
            clock=SystemClock(),
            poll_s=5.0,
        )
        before = _metric(endpoint, 'grpc_server_started_total{grpc_method="Range"')
        for _ in range(5):
            await member.look()
        assert _metric(endpoint, 'grpc_server_started_total{grpc_method="Range"') == before + 5

    with EtcdCluster(tmp_path) as cluster:
        endpoint = cluster.endpoints[0]
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5), endpoint))


class NoActions:
    """A member's actions that a look asking nothing never uses."""

    async def change(
        self, instance: str, policy: str, values: Mapping[str, float], reason: str
    ) -> MemberOutcome:
        raise AssertionError("nothing was asked")

    async def counts(
        self, instance: str, since: datetime, until: datetime, ttft_slo_s: float
    ) -> ServerCounts | None:
        raise AssertionError("the window has not passed")

    def standing(self, instance: str, policy: str, since: datetime | None) -> Standing:
        raise AssertionError("nothing was asked")


def _proposals_committed(endpoint: str) -> float:
    """etcd's own count of raft proposals committed (writes), from its /metrics."""
    return _metric(endpoint, "etcd_server_proposals_committed_total")


def _metric(endpoint: str, sample: str) -> float:
    """One sample of etcd's /metrics (its name and the start of its labels), summed."""
    total, found = 0.0, False
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith((f"{sample} ", f"{sample},", f"{sample}}}")):
                total, found = total + float(line.split()[-1]), True
    assert found, f"etcd's /metrics has no {sample}"
    return total
