"""The reconcile of a restarted governor respects its group's disruption budget (real etcd).

A governor dies after its server's restart, before the verification (the journal's entry is
open at ``restarted``). Its lease, and the restart slot bound to it, expire; another replica of
the group takes the group's only slot meanwhile. The governor's next start finds a server it
cannot vouch for: it must count it as unavailable (take a slot before finishing the change),
and with the slot taken by another it must leave the change as the journal says and say why,
not verify, revert or restart while another replica of the group is down. Once the slot is
free it finishes while it runs: its actuation runner tries the deferred reconcile again on a
schedule (here every second or so), not at its next start.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from actuators.kinds import VLLM
from actuators.vllm.actuator import VllmActuator
from daemon.api import (
    DONE,
    OPEN,
    REFUSED,
    REVERTED,
    ActuationResult,
    ChangeRequest,
    SystemClock,
    VllmInstance,
)
from daemon.core.settings import (
    GovernorConfig,
    HostSourceSection,
    NvmlSourceSection,
    SourcesSection,
)
from daemon.engine.actuation.kind_runner import KindRunner
from daemon.engine.actuation.reconcile_retries import ReconcileRetries, RetryDelays
from daemon.engine.runtime.supervisor import Readiness
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

            # The governor's next start: a new lease, the same journal, its actuation runner
            # (which reconciles at start, then applies changes), retrying every second or so.
            again = Governor(client, "host-a", ["a1"], budget=1, wait_s=0.5)
            await again.registrar.refresh()
            second = VllmActuator(
                journal, windows, SystemClock(), short_tmp / "state", restart_slots=again.slots
            )
            outcomes: list[ActuationResult] = []
            retries = ReconcileRetries(SystemClock(), RetryDelays(base_s=1.0, cap_s=1.0))
            runner = KindRunner(VLLM, second, lambda: config, outcomes.append, retries)
            (runs,) = [task for task in runner.tasks() if task.name == "actuation runner"]

            async def run() -> None:
                await runs.run(Readiness())

            running = asyncio.create_task(run(), name=runs.name)
            try:
                while not runner.deferred():
                    await asyncio.sleep(0.05)
                deferred = outcomes[0]
                assert deferred.state == REFUSED, deferred.outcome
                assert "reconcile deferred (restart_slot): no restart slot free" in deferred.outcome
                assert "held by host-b/b1" in deferred.outcome
                still = journal.open_entry("a1")
                assert still is not None
                assert (still.state, still.step) == (OPEN, "restarted")
                (waiting,) = runner.deferred()
                assert (waiting.target, waiting.entry) == ("a1", still.id)

                await other.slots.release("b1")
                # With the slot free, a later try finishes it while the governor runs:
                # verified (or, on a noisy machine, reverted).
                async with asyncio.timeout(90):
                    while not outcomes or outcomes[-1].state == REFUSED:
                        await asyncio.sleep(0.05)
            finally:
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
            finished = outcomes[-1]
            assert finished.state in (DONE, REVERTED), finished
            assert all(outcome.state == REFUSED for outcome in outcomes[:-1])
            assert runner.deferred() == []
            reverts.append(finished.state == REVERTED)
        assert await client.get_prefix(KEYS.all_slots) == []  # given back once verified
        journal.close()

    reverts: list[bool] = []

    with (
        EtcdCluster(short_tmp / "etcd") as cluster,
        supervised_sim(short_tmp, "max-num-seqs: 8\n") as sim,
    ):
        instance = sim.instance()
        config = GovernorConfig(
            vllm=(instance,),
            sources=SourcesSection(
                nvml=NvmlSourceSection(enabled=False), host=HostSourceSection(enabled=False)
            ),
        )
        asyncio.run(scenario(instance, EtcdGateway(cluster.endpoints, 5)))
        # The first governor's restart; the deferred reconcile added none (a revert adds one).
        assert sim.spawns() == 2 + sum(reverts)
