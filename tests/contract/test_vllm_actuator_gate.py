"""A restart behind the admission gate: HAProxy stops admitting before vLLM gets SIGTERM.

Real vLLM keeps its port and ``/health`` while it drains and answers new requests with HTTP 500;
with a gate, those requests must meet the gate's 503 instead (or another server), the requests
inside must finish, and the gate must admit again once the new server serves. Everything is
real: ``sim serve`` (which drains as vLLM does) under supervisord, HAProxy on the shipped
reference config in front of it, clients through HAProxy, and the engine's journal.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from actuators.vllm.actuator import VllmActuator
from daemon.api import DONE, ChangeRequest, SystemClock, VllmInstance
from daemon.core.gate_settings import GateSettings
from daemon.engine.haproxy_gate import gate_of
from daemon.engine.journal_store import SqliteJournal
from tests.contract.test_vllm_actuator import FORWARD, instance_of, steps_of
from tests.support.completions_load import Load
from tests.support.haproxy import BACKEND, SERVER, Haproxy, render_reference_config
from tests.support.live_windows import live_windows
from tests.support.services import free_port, require_command
from tests.support.supervised_sim import SupervisedSim, supervised_sim

pytestmark = [
    pytest.mark.service("supervisord"),
    pytest.mark.service("haproxy"),
    pytest.mark.asyncio,
    pytest.mark.slow,
]

DRAINING_CONFIG = "max-num-seqs: 8\nshutdown-timeout: 10\n"


@contextmanager
def gate_in_front(directory: Path, sim: SupervisedSim) -> Iterator[tuple[Haproxy, int]]:
    """HAProxy on the reference config in front of the sim; its frontend port."""
    socket_path = directory / "haproxy.sock"
    port = free_port()
    config = render_reference_config(
        frontend_port=port,
        server_port=sim.port,
        stats_socket=socket_path,
        maxconn=8,
        queue_timeout="30s",
        check_inter="200ms",
    )
    with Haproxy(require_command("haproxy"), directory, config, socket_path) as haproxy:
        yield haproxy, port


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


class StatusWatch:
    """Every status HAProxy shows for the server, polled in a thread while a change runs."""

    def __init__(self, haproxy: Haproxy) -> None:
        self._haproxy = haproxy
        self.seen: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(0.05):
            status = self._haproxy.stat(BACKEND, SERVER)["status"]
            if not self.seen or self.seen[-1] != status:
                self.seen.append(status)

    def __enter__(self) -> StatusWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


async def test_the_gate_drains_before_the_restart_and_admits_once_the_new_server_serves(
    short_tmp: Path,
) -> None:
    with (
        supervised_sim(short_tmp, DRAINING_CONFIG) as sim,
        gate_in_front(short_tmp, sim) as (haproxy, port),
    ):
        instance = gated(sim, haproxy)
        journal = SqliteJournal(short_tmp / "state.sqlite3", SystemClock())
        # Long requests are inside when the gate drains; short ones keep arriving and meet it.
        inside = Load(port, clients=4, requests_per_client=2, max_tokens=400)
        arriving = Load(port, clients=2, requests_per_client=2000, max_tokens=4)
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
        assert entry.facts["gate_admitted"] == "UP"
        assert entry.facts["drain"].startswith(f"gate {haproxy.stats_socket} vllm/main drained")
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


async def test_a_server_an_operator_drained_stays_drained_through_a_restart(
    short_tmp: Path,
) -> None:
    with (
        supervised_sim(short_tmp, "max-num-seqs: 8\n") as sim,
        gate_in_front(short_tmp, sim) as (haproxy, _port),
    ):
        haproxy.command(f"set server {BACKEND}/{SERVER} state drain")
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
        journal.close()
