"""A restart behind the admission gate: HAProxy stops admitting before vLLM gets SIGTERM.

Real vLLM keeps its port and ``/health`` while it drains and answers new requests with HTTP 500;
with a gate, those requests must meet the gate's 503 instead (or another server), the requests
inside must finish, and the gate must admit again once the new server serves. Everything is
real: ``sim serve`` (which drains as vLLM does) under supervisord, HAProxy on the shipped
reference config in front of it, clients through HAProxy, and the engine's journal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actuators.vllm.actuator import VllmActuator
from daemon.api import DONE, ChangeRequest, SystemClock, VllmInstance
from daemon.core.gate_settings import GateSettings
from daemon.engine.actuation.haproxy_gate import gate_of
from daemon.engine.storage.journal_store import SqliteJournal
from tests.contract.test_vllm_actuator import FORWARD, instance_of, steps_of
from tests.support.completions_load import Load
from tests.support.haproxy import BACKEND, SERVER, Haproxy, StatusWatch, gate_in_front
from tests.support.live_windows import live_windows
from tests.support.supervised_sim import SupervisedSim, supervised_sim

pytestmark = [
    pytest.mark.service("supervisord"),
    pytest.mark.service("haproxy"),
    pytest.mark.asyncio,
    pytest.mark.slow,
]

DRAINING_CONFIG = "max-num-seqs: 8\nshutdown-timeout: 10\n"


def gated(sim: SupervisedSim, haproxy: Haproxy) -> VllmInstance:
    settings = GateSettings(
        enabled=True,
        stats_socket=str(haproxy.stats_socket),
        backend=BACKEND,
        server=SERVER,
        timeout_s=0.5,
        drain_timeout_s=15.0,
    )
    return instance_of(sim, gate=settings, verify_max_ttft_p95_ratio=1000.0)


async def test_the_gate_drains_before_the_restart_and_admits_once_the_new_server_serves(
    short_tmp: Path,
) -> None:
    with (
        supervised_sim(short_tmp, DRAINING_CONFIG) as sim,
        gate_in_front(short_tmp, sim.port) as (haproxy, port),
    ):
        instance = gated(sim, haproxy)
        journal = SqliteJournal(short_tmp / "state.sqlite3", SystemClock())
        # Long requests are inside when the gate drains; short ones keep arriving and meet it.
        inside = Load(port, clients=4, requests_per_client=2, max_tokens=400, retry_after=True)
        arriving = Load(port, clients=2, requests_per_client=2000, max_tokens=4, retry_after=True)
        async with live_windows(instance) as windows:
            actuator = VllmActuator(journal, windows, SystemClock(), short_tmp, gate_of)
            with inside, arriving, StatusWatch(haproxy) as watch:
                change = ChangeRequest("sim", "test", {"max_num_seqs": 16}, {"max_num_seqs": 8})
                result = await actuator.apply(instance, change)
                arriving.stop()
                inside.stop()
        assert result.state == DONE, result.outcome
        assert steps_of(journal, result.entry_id) == [*FORWARD, "verifying", DONE]
        assert "DRAIN" in watch.seen, watch.seen
        assert haproxy.stat(BACKEND, SERVER)["status"] == "UP", "the gate admits again"
        assert result.entry_id is not None
        entry = journal.entry(result.entry_id)
        assert entry is not None
        assert entry.facts["gate_held"] is None
        # Admitting is the end of the drain; HAProxy's health checks may still be rising then
        # ("DOWN 1/2" on a loaded machine) before the server shows UP.
        admitted = entry.facts["gate_admitted"]
        assert admitted == "UP" or admitted.startswith("DOWN "), admitted
        assert entry.facts["drain"].startswith(f"gate {haproxy.stats_socket} vllm/main drained")
        # The cap stood at the old max-num-seqs (8): as open as vLLM allowed, it opens to 16.
        assert entry.facts["gate_cap_followed"] == [8, 16]
        assert haproxy.stat(BACKEND, SERVER)["slim"] == "16"
        # No request reached the draining server: it refused nothing, and no client saw a 500.
        assert entry.facts["restart"]["refused_in_drain"] == 0
        outcomes = inside.outcomes() + arriving.outcomes()
        assert not [outcome for outcome in outcomes if outcome.status == 500]
        refused = [outcome for outcome in outcomes if outcome.status == 503]
        assert refused, "requests arrived during the drain and met the gate"
        for outcome in refused:
            assert json.loads(outcome.body)["error"]["type"] == "ServiceUnavailableError"
        # Every request either got in and finished (those inside when the gate drained too:
        # no abort, no cut stream) or met the gate; none was lost in between.
        assert all(outcome.ok or outcome.status == 503 for outcome in outcomes), outcomes
        assert sum(outcome.ok for outcome in inside.outcomes()) >= inside.clients
        journal.close()


async def test_a_server_an_operator_drained_stays_drained_through_a_restart_at_its_cap(
    short_tmp: Path,
) -> None:
    with (
        supervised_sim(short_tmp, "max-num-seqs: 8\n") as sim,
        gate_in_front(short_tmp, sim.port) as (haproxy, _port),
    ):
        haproxy.command(f"set server {BACKEND}/{SERVER} state drain")
        haproxy.command(f"set maxconn server {BACKEND}/{SERVER} 5")  # the gate's controller's
        instance = gated(sim, haproxy)
        journal = SqliteJournal(short_tmp / "state.sqlite3", SystemClock())
        async with live_windows(instance) as windows:
            actuator = VllmActuator(journal, windows, SystemClock(), short_tmp, gate_of)
            change = ChangeRequest("sim", "test", {"max_num_seqs": 16}, {"max_num_seqs": 8})
            result = await actuator.apply(instance, change)
        assert result.state == DONE, result.outcome
        assert haproxy.stat(BACKEND, SERVER)["status"] == "DRAIN", "not the governor's to lift"
        assert result.entry_id is not None
        entry = journal.entry(result.entry_id)
        assert entry is not None
        assert entry.facts["drain"].startswith(f"gate {haproxy.stats_socket} vllm/main already")
        assert "gate_admitted" not in entry.facts
        # A cap the gate's controller set below max-num-seqs stays where it was.
        assert "gate_cap_followed" not in entry.facts
        assert haproxy.stat(BACKEND, SERVER)["slim"] == "5"
        journal.close()
