"""The reconcile of a restarted governor respects its group's disruption budget (real etcd).

A governor dies after its server's restart, before the verification (the journal's entry is
open at ``restarted``). Its lease, and the restart slot bound to it, expire; another replica of
the group takes the group's only slot meanwhile. The governor's next start finds a server it
cannot vouch for: it must count it as unavailable (take a slot before finishing the change),
and with the slot taken by another it must leave the change as the journal says and say why,
not verify, revert or restart while another replica of the group is down.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from actuators.vllm.actuator import VllmActuator
from daemon.api import (
    DONE,
    OPEN,
    REFUSED,
    REVERTED,
    ChangeRequest,
    Envelope,
    SystemClock,
    VllmInstance,
)
from daemon.engine.storage.journal_store import SqliteJournal
from daemon.fleet.etcd_gateway import EtcdGateway
from tests.contract.test_fleet_restart_slots import KEYS, Governor
from tests.support.etcd import EtcdCluster
from tests.support.live_windows import live_windows
from tests.support.supervised_sim import supervised_sim

pytestmark = [pytest.mark.service("etcd"), pytest.mark.service("supervisord"), pytest.mark.slow]


def test_a_reconcile_past_the_restart_takes_a_slot_first(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario(instance: VllmInstance, client: EtcdGateway) -> None:
        dead = Governor(client, "host-a", ["a1"], budget=1, wait_s=0.5)
        other = Governor(client, "host-b", ["b1"], budget=1, wait_s=0.5)
        await dead.registrar.refresh()
        await other.registrar.refresh()
        journal = SqliteJournal(short_tmp / "state.sqlite3", SystemClock())
        change = ChangeRequest("a1", "test-policy", {"max_num_seqs": 16}, {"max_num_seqs": 8})
        async with live_windows(instance) as windows:
            # The first governor restarts a1 with a slot and dies before verifying it.
            monkeypatch.setenv("VLLM_GOVERNOR_TEST_HOLD_AFTER_STEP", "restarted:300")
            first = VllmActuator(
                journal, windows, SystemClock(), short_tmp / "state", restart_slots=dead.slots
            )
            applying = asyncio.create_task(first.apply(instance, change))
            while (entry := journal.open_entry("a1")) is None or entry.step != "restarted":
                await asyncio.sleep(0.1)
            applying.cancel()
            await asyncio.gather(applying, return_exceptions=True)
            monkeypatch.delenv("VLLM_GOVERNOR_TEST_HOLD_AFTER_STEP")
            await client.revoke(dead.registrar.lease)  # its lease expires: the slot with it
            assert await other.slots.acquire("b1") == ""  # another replica restarts meanwhile

            # The governor's next start: a new lease, the same journal.
            again = Governor(client, "host-a", ["a1"], budget=1, wait_s=0.5)
            await again.registrar.refresh()
            second = VllmActuator(
                journal, windows, SystemClock(), short_tmp / "state", restart_slots=again.slots
            )
            deferred = await second.reconcile(instance)
            assert deferred is not None
            assert deferred.state == REFUSED, deferred.outcome
            assert "reconcile deferred (restart_slot): no restart slot free" in deferred.outcome
            assert "held by host-b/b1" in deferred.outcome
            still = journal.open_entry("a1")
            assert still is not None
            assert (still.state, still.step) == (OPEN, "restarted")

            await other.slots.release("b1")
            # With the slot, it finishes: verified (or, on a noisy machine, reverted).
            finished = await second.reconcile(instance)
            assert finished is not None
            assert finished.state in (DONE, REVERTED), finished
            reverts.append(finished.state == REVERTED)
        assert await client.get_prefix(KEYS.all_slots) == []  # given back once verified
        journal.close()

    reverts: list[bool] = []

    with (
        EtcdCluster(short_tmp / "etcd") as cluster,
        supervised_sim(short_tmp, "max-num-seqs: 8\n") as sim,
    ):
        instance = VllmInstance(
            name="a1",
            url=sim.url,
            scrape_interval_s=0.5,
            config_path=sim.vllm_yaml,
            env_file=sim.env_file,
            restart_command=sim.restart_command(),
            restart_timeout_s=30.0,
            ready_timeout_s=20.0,
            verify_window_s=1.5,
            knobs={
                "max_num_seqs": Envelope(
                    min=1, max=4096, max_step=4096, min_dwell_s=0, hourly_budget=20
                )
            },
        )
        asyncio.run(scenario(instance, EtcdGateway(cluster.endpoints, 5)))
        # The first governor's restart; the deferred reconcile added none (a revert adds one).
        assert sim.spawns() == 2 + sum(reverts)
