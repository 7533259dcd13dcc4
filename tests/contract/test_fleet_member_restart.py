"""A member's governor restarted mid-change never makes the rollout's change twice.

The canary's governor is what the daemon runs for it, in process: the signal plane scraping
its server, the actuation plane with the real vLLM actuator (over supervisord and ``sim
serve``), and the rollout's member side with the engine's actions. It is killed (every task
cancelled at once: what SIGKILL leaves) after its server took the change and before it
reported; its next start (a new plane over the same state database, the same etcd) must
report what the journal says, with the values before, and begin nothing more.

* Killed after the restart, before the verification (the journal open at ``restarted``):
  the next start's reconcile finishes the change, the member waits for it and reports it.
  Before: it asked for the same change again, which the actuator refused (``no_change``:
  the files already said so), and reported that refusal: a failure that aborts the rollout.
* The change failed (the server refused to start on it) and was reverted, and the report
  was lost with etcd; killed, then started again. Before: it applied the same change again,
  two more restarts of a server the change had just failed on.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from actuators.kinds import VLLM
from actuators.vllm.actuator import VllmActuator
from actuators.vllm.registry import V0_33, VersionRegistry, registry_for
from daemon.api import (
    DONE,
    REVERTED,
    ActuatorServices,
    JournalEntry,
    SystemClock,
)
from daemon.core.settings import (
    GovernorConfig,
    GovernorSection,
    HostSourceSection,
    NvmlSourceSection,
    SourcesSection,
)
from daemon.engine.actuation.actuation_plane import ActuationPlane
from daemon.engine.actuation.rollout_actions import EngineRolloutActions
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.runtime.supervisor import EternalTask, Readiness
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.rollout_member import RolloutMember
from daemon.fleet.rollout_state import MemberReport, Step, approve, propose
from daemon.fleet.rollout_store import RolloutStore
from tests.support.etcd import EtcdCluster
from tests.support.supervised_sim import SupervisedSim, supervised_sim

pytestmark = [pytest.mark.service("etcd"), pytest.mark.service("supervisord"), pytest.mark.slow]
KEYS = FleetKeys("/m/")
HOLD = "VLLM_GOVERNOR_TEST_HOLD_AFTER_STEP"
# A stub registry without the cross-knob rule lets max_num_seqs > max_num_batched_tokens
# through preflight; the sim, like vLLM, refuses to start with it: the change is reverted.
VLLM_REGISTRY = registry_for
LAX = VersionRegistry("0.33 (stub)", V0_33.knobs, V0_33.removed, V0_33.never, ())


class MemberGovernor:
    """One start of the canary's governor: its planes and its rollout member, until killed."""

    def __init__(self, client: EtcdGateway, config: GovernorConfig, *, lax: bool) -> None:
        clock = SystemClock()

        def actuator(services: ActuatorServices) -> VllmActuator:
            return VllmActuator(
                services.journal,
                services.windows,
                services.clock,
                services.freeze_dir,
                registry_of=(lambda _version: LAX) if lax else VLLM_REGISTRY,
            )

        registry = CollectorRegistry()
        self.signals = SignalPlane(config, clock, registry)
        self.actuation = ActuationPlane(
            lambda: config,
            self.signals,
            clock,
            registry,
            config.governor.state_dir / "state.sqlite3",
            kinds=(replace(VLLM, factory=actuator),),
            on_applied=lambda _result: None,
            record=lambda _decisions: None,
        )
        self.member = RolloutMember(
            RolloutStore(client, KEYS),
            host="h1",
            instances=lambda: ["a1"],
            actions=EngineRolloutActions(lambda: config, self.actuation, self.signals.store, clock),
            clock=clock,
            poll_s=0.2,
        )
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        async def run(task: EternalTask) -> None:
            await task.run(Readiness())

        eternal = [*self.signals.tasks(), *self.actuation.tasks()]
        self._tasks = [asyncio.create_task(run(task), name=task.name) for task in eternal]
        self._tasks.append(
            asyncio.create_task(self.member.run(lambda: None), name="fleet rollout member")
        )

    async def kill(self) -> None:
        """Every task cancelled at once, nothing finished: what SIGKILL leaves behind."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def _report(store: RolloutStore, timeout_s: float) -> MemberReport:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        if reports := await store.reports("llama", "shrink"):
            return reports[0]
        await asyncio.sleep(0.2)
    raise AssertionError("the canary's governor never reported")


async def _at_step(governor: MemberGovernor, step: str) -> None:
    while (entry := governor.actuation.journal.open_entry("a1")) is None or entry.step != step:
        await asyncio.sleep(0.05)


async def _asked_to_apply(store: RolloutStore, seqs: float) -> None:
    rollout = propose("llama", "shrink", {"max_num_seqs": seqs}, ("h1/a1", "h2/b1"), "h1/a1")
    assert (await store.propose(approve(rollout, "ops"))).created  # h1/a1 asked to apply


async def _started_again(
    client: EtcdGateway, config: GovernorConfig, *, lax: bool
) -> tuple[MemberReport, list[JournalEntry]]:
    """The governor's next start, until it reports: its report and the journal then."""
    again = MemberGovernor(client, config, lax=lax)
    again.start()
    try:
        report = await _report(RolloutStore(client, KEYS), timeout_s=90)
    finally:
        await again.kill()
    entries = again.actuation.journal.recent()
    again.actuation.close()
    return report, entries


def test_killed_after_its_restart_it_reports_the_reconciled_change_and_restarts_nothing(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario(config: GovernorConfig, client: EtcdGateway) -> bool:
        store = RolloutStore(client, KEYS)
        await _asked_to_apply(store, 16.0)
        monkeypatch.setenv(HOLD, "restarted:300")
        first = MemberGovernor(client, config, lax=False)
        first.start()
        await _at_step(first, "restarted")
        await first.kill()
        first.actuation.close()
        monkeypatch.delenv(HOLD)
        assert await store.reports("llama", "shrink") == []  # it died before reporting

        report, entries = await _started_again(client, config, lax=False)
        # One change of a1, begun by the first start and finished by the second (verified;
        # on this noisy machine, perhaps reverted); nothing else begun, not even a refusal.
        assert [(e.state in (DONE, REVERTED)) for e in entries] == [True], _outcomes(entries)
        reverted = entries[0].state == REVERTED
        assert report.asked is Step.APPLY
        assert report.ok is not reverted, report.detail
        assert report.detail.startswith(f"{entries[0].state}: "), report.detail
        assert report.previous == {"max_num_seqs": 8.0}  # what a revert of the canary restores
        return reverted

    with (
        EtcdCluster(short_tmp / "etcd") as cluster,
        supervised_sim(short_tmp, "max-num-seqs: 8\n") as sim,
    ):
        config = _config(short_tmp, sim)
        reverted = asyncio.run(scenario(config, EtcdGateway(cluster.endpoints, 5)))
        # The first start's restart (and the reconcile's revert, had the verification failed).
        assert sim.spawns() == 2 + reverted


def test_a_reverted_change_whose_report_was_lost_is_reported_not_applied_again(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario(config: GovernorConfig, cluster: EtcdCluster) -> None:
        client = EtcdGateway(cluster.endpoints, 2)
        store = RolloutStore(client, KEYS)
        await _asked_to_apply(store, 128.0)  # the server refuses to start with it
        monkeypatch.setenv(HOLD, "revert_ready:2")
        first = MemberGovernor(client, config, lax=True)
        first.start()
        await _at_step(first, "revert_ready")
        cluster.stop_member(0)  # etcd gone: the report of the revert is lost
        while first.actuation.journal.open_entry("a1") is not None:
            await asyncio.sleep(0.05)
        await first.kill()
        first.actuation.close()
        monkeypatch.delenv(HOLD)
        cluster.start_member(0)
        assert await store.reports("llama", "shrink") == []

        report, entries = await _started_again(client, config, lax=True)
        assert [e.state for e in entries] == [REVERTED], _outcomes(entries)
        assert report.asked is Step.APPLY
        assert not report.ok
        assert report.detail.startswith("reverted: "), report.detail
        assert report.previous == {"max_num_seqs": 8.0}

    with (
        EtcdCluster(short_tmp / "etcd") as cluster,
        supervised_sim(short_tmp, "max-num-seqs: 8\nmax-num-batched-tokens: 64\n") as sim,
    ):
        # A sim slow to refuse its flags is "restarted" and never ready: 10 s say so sooner.
        asyncio.run(scenario(_config(short_tmp, sim, ready_timeout_s=10.0), cluster))
        # The failed start and the revert's; before, the same change again: two more.
        assert sim.spawns() == 3


def _outcomes(entries: list[JournalEntry]) -> list[tuple[str, str]]:
    return [(entry.state, entry.outcome) for entry in entries]


def _config(directory: Path, sim: SupervisedSim, ready_timeout_s: float = 20.0) -> GovernorConfig:
    instance = sim.instance(ready_timeout_s=ready_timeout_s)
    (directory / "state").mkdir()
    return GovernorConfig(
        governor=GovernorSection(state_dir=directory / "state", policy_dirs=()),
        vllm=(instance,),
        sources=SourcesSection(
            nvml=NvmlSourceSection(enabled=False), host=HostSourceSection(enabled=False)
        ),
    )
