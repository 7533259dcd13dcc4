"""The fleet freeze against a real etcd: what each governor's freeze watch says, the vLLM
actuator (over supervisord and a real ``sim serve``) refusing what it holds, and the live
changes (a log level on the Envoy admin double, an admission gate's cap) going on while the
fleet cannot be seen and held while it is frozen.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from actuators.haproxy.actuator import HaproxyActuator
from actuators.http_log_level.actuator import HttpLogLevelActuator
from actuators.vllm.actuator import VllmActuator
from daemon.api import (
    DONE,
    DRY_RUN,
    REFUSED,
    ChangeRequest,
    HttpLogLevelTarget,
    SystemClock,
    VllmInstance,
    no_gate_caps,
)
from daemon.core.gate_actuation import cap_request
from daemon.engine.storage.cap_journal import SqliteCapJournal
from daemon.engine.storage.journal_store import SqliteJournal
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.freeze_watch import FleetFreezeWatch
from daemon.fleet.freeze_writes import freeze, unfreeze
from daemon.fleet.keys import FleetKeys
from tests.support.envoy_admin import EnvoyAdmin
from tests.support.etcd import EtcdCluster
from tests.support.live_windows import live_windows
from tests.support.supervised_sim import supervised_sim

pytestmark = pytest.mark.service("etcd")
KEYS = FleetKeys("/t/")
GROUPS = {"a1": "llama", "a2": "llama", "b1": "mistral"}
STALE_AFTER_S = 15.0


class SteppedClock:
    """Real wall time (freezes expire by it); a monotonic side the test moves by hand."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def monotonic(self) -> float:
        return self.now_s

    def wall(self) -> datetime:
        return datetime.now(UTC)


def watch_of(client: EtcdGateway, clock: SteppedClock) -> FleetFreezeWatch:
    return FleetFreezeWatch(
        client,
        KEYS,
        group_of=GROUPS.__getitem__,
        refresh_s=1.0,
        stale_after_s=STALE_AFTER_S,
        clock=clock,
    )


def held(watch: FleetFreezeWatch, *, restart: bool = True) -> dict[str, str]:
    now = datetime.now(UTC)
    return {name: watch.freeze_reason(name, now, restart=restart) for name in GROUPS}


def test_a_fleet_freeze_and_a_group_freeze_hold_whom_they_cover(tmp_path: Path) -> None:
    async def scenario(client: EtcdGateway) -> None:
        watch = watch_of(client, SteppedClock())
        soon = datetime.now(UTC) + timedelta(hours=1)
        await watch.refresh()
        assert held(watch) == {"a1": "", "a2": "", "b1": ""}

        await freeze(client, KEYS, group="llama", until=soon, reason="model swap", by="ops")
        await watch.refresh()
        reasons = held(watch)
        assert reasons["a1"] == reasons["a2"] != ""
        assert "fleet freeze of group llama until" in reasons["a1"]
        assert reasons["a1"].endswith(": model swap (by ops)")
        assert reasons["b1"] == ""
        assert held(watch, restart=False)["a1"] == reasons["a1"]  # a freeze holds live changes

        await freeze(client, KEYS, group=None, until=soon, reason="incident 4711", by="ops")
        await watch.refresh()
        assert all("fleet freeze of the fleet" in why for why in held(watch).values())

        await unfreeze(client, KEYS, group=None)
        assert await unfreeze(client, KEYS, group="llama")
        assert not await unfreeze(client, KEYS, group="llama")
        await watch.refresh()
        assert held(watch) == {"a1": "", "a2": "", "b1": ""}

        past = datetime.now(UTC) - timedelta(seconds=1)
        await freeze(client, KEYS, group=None, until=past, reason="over", by="ops")
        await watch.refresh()
        assert held(watch) == {"a1": "", "a2": "", "b1": ""}  # expired: no longer counts

        await client.put(KEYS.freeze("mistral"), b"not json")
        await watch.refresh()
        assert "an unreadable fleet freeze at /t/freeze/group/mistral" in held(watch)["a1"]

    with EtcdCluster(tmp_path) as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))


def test_an_unknown_fleet_holds_restarts_and_lets_live_changes_through(tmp_path: Path) -> None:
    async def scenario(cluster: EtcdCluster, client: EtcdGateway) -> None:
        clock = SteppedClock()
        watch = watch_of(client, clock)
        # Nothing read yet (a governor just started): unknown.
        assert held(watch)["a1"].startswith("fleet state unknown (etcd last read never: ")
        assert held(watch, restart=False) == {"a1": "", "a2": "", "b1": ""}
        await watch.refresh()
        assert held(watch)["a1"] == ""

        clock.now_s += STALE_AFTER_S + 1
        assert "fleet state unknown (etcd last read 16 s ago: " in held(watch)["a1"]  # not since
        await watch.refresh()
        assert held(watch)["a1"] == ""

        for index in range(3):  # the whole cluster down
            cluster.stop_member(index)
        clock.now_s += 1.0
        await watch.refresh()
        reason = held(watch)["a1"]
        assert "fleet state unknown (etcd last read 1 s ago: no etcd member answered" in reason
        assert reason.endswith("no restart while a fleet is configured and cannot be seen")
        assert held(watch, restart=False) == {"a1": "", "a2": "", "b1": ""}

        for index in range(3):
            cluster.start_member(index, wait_healthy=False)
        cluster.wait_healthy(cluster.members)
        await watch.refresh()
        assert held(watch) == {"a1": "", "a2": "", "b1": ""}

    with EtcdCluster(tmp_path, size=3) as cluster:
        asyncio.run(scenario(cluster, EtcdGateway(cluster.endpoints, timeout_s=2)))


@pytest.mark.service("supervisord")
@pytest.mark.slow
def test_the_vllm_actuator_refuses_what_the_fleet_freeze_holds(short_tmp: Path) -> None:
    async def scenario(sim_yaml: Path, instance: VllmInstance, client: EtcdGateway) -> None:
        clock = SteppedClock()
        watch = watch_of(client, clock)
        journal = SqliteJournal(short_tmp / "state.sqlite3", SystemClock())
        change = ChangeRequest("a1", "test-policy", {"max_num_seqs": 16}, {"max_num_seqs": 8})
        async with live_windows(instance) as windows:
            actuator = VllmActuator(
                journal, windows, SystemClock(), short_tmp / "state", fleet_freeze=watch
            )
            await watch.refresh()
            planned = await actuator.apply(instance, change, dry_run=True)
            assert planned.state == DRY_RUN, planned.outcome

            soon = datetime.now(UTC) + timedelta(hours=1)
            await freeze(client, KEYS, group="llama", until=soon, reason="model swap", by="ops")
            await watch.refresh()
            automatic = await actuator.apply(instance, change)
            assert automatic.state == REFUSED
            assert "fleet freeze of group llama" in automatic.outcome
            dry = await actuator.apply(instance, change, dry_run=True)
            assert dry.state == REFUSED
            assert ("frozen", watch.freeze_reason("a1", datetime.now(UTC), restart=True)) in (
                dry.refusals
            )
            dry_mode = instance.model_copy(update={"mode": "dry-run"})
            assert (await actuator.apply(dry_mode, change)).state == REFUSED

            await unfreeze(client, KEYS, group="llama")
            clock.now_s += STALE_AFTER_S + 1  # and then etcd is not read for too long
            unknown = await actuator.apply(instance, change)
            assert unknown.state == REFUSED
            assert "fleet state unknown" in unknown.outcome
        assert sim_yaml.read_text().endswith("max-num-seqs: 8\n")

    with (
        EtcdCluster(short_tmp / "etcd") as cluster,
        supervised_sim(short_tmp, "max-num-seqs: 8\n") as sim,
    ):
        instance = sim.instance()
        asyncio.run(scenario(sim.vllm_yaml, instance, EtcdGateway(cluster.endpoints, 5)))
        assert sim.spawns() == 1  # never restarted


def test_a_live_log_level_goes_on_while_the_fleet_is_unseen_and_stops_when_frozen(
    tmp_path: Path,
) -> None:
    async def scenario(client: EtcdGateway, admin: EnvoyAdmin) -> None:
        watch = watch_of(client, SteppedClock())
        target = HttpLogLevelTarget(
            name="a1",
            url=f"{admin.url}/logging?level={{level}}",
            levels={"DEBUG": "debug", "INFO": "info", "WARNING": "warning", "ERROR": "error"},
        )
        journal = SqliteJournal(tmp_path / "state.sqlite3", SystemClock())
        actuator = HttpLogLevelActuator(journal, SystemClock(), tmp_path, fleet_freeze=watch)
        quieter = ChangeRequest("a1", "quiet", {"log_level": 40.0}, {"log_level": 20.0})
        # Nothing read from etcd yet: a restart would be held, a live level is not.
        assert (await actuator.apply(target, quieter)).state == DONE
        assert admin.state.level == "error"

        soon = datetime.now(UTC) + timedelta(hours=1)
        await freeze(client, KEYS, group=None, until=soon, reason="incident 4711", by="ops")
        await watch.refresh()
        louder = ChangeRequest("a1", "loud", {"log_level": 20.0}, {"log_level": 40.0})
        frozen = await actuator.apply(target, louder)
        assert frozen.state == REFUSED
        assert "fleet freeze of the fleet" in frozen.outcome
        assert admin.state.level == "error"
        journal.close()

    with EtcdCluster(tmp_path / "etcd") as cluster, EnvoyAdmin() as admin:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5), admin))


def test_the_admission_gate_cap_is_held_by_a_freeze_not_by_an_unseen_fleet(
    tmp_path: Path,
) -> None:
    async def scenario(client: EtcdGateway) -> None:
        watch = watch_of(client, SteppedClock())
        journal = SqliteCapJournal(tmp_path / "state.sqlite3", SystemClock())
        changes = SqliteJournal(tmp_path / "state.sqlite3", SystemClock())
        gate = HaproxyActuator(
            journal,
            SystemClock(),
            tmp_path,
            gates=no_gate_caps,
            changes=changes,
            fleet_freeze=watch,
        )
        instance = VllmInstance(name="a1", url="http://127.0.0.1:9")
        change = cap_request("a1", "admission", cap=8, max_cap=64, reason="queue builds up")
        assert gate.preflight(instance, change) == ""  # unseen: a cap is live, it goes on

        soon = datetime.now(UTC) + timedelta(hours=1)
        await freeze(client, KEYS, group="llama", until=soon, reason="model swap", by="ops")
        await watch.refresh()
        held = gate.preflight(instance, change)
        assert "fleet freeze of group llama until" in held
        assert held.endswith("model swap (by ops): the cap holds")
        changes.close()
        journal.close()

    with EtcdCluster(tmp_path / "etcd") as cluster:
        asyncio.run(scenario(EtcdGateway(cluster.endpoints, timeout_s=5)))
