"""The HAProxy actuator against a real HAProxy on the reference config, in front of a real
``vllm-governor sim serve``: the cap moves live and is read back, every refusal leaves the gate
as it was, and only changes reach the journal."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from actuators.haproxy.actuator import HaproxyActuator
from daemon.api import (
    CAP_APPLIED,
    CAP_REFUSED,
    CAP_UNCHANGED,
    CapResult,
    ChangeRequest,
    SystemClock,
    VllmInstance,
)
from daemon.core.gate_actuation import cap_request
from daemon.core.gate_settings import GateSettings
from daemon.engine.actuation.haproxy_gate import HaproxyGate
from daemon.engine.storage.cap_journal import SqliteCapJournal
from daemon.engine.storage.journal_store import SqliteJournal
from tests.support.haproxy import BACKEND, SERVER, Haproxy, render_reference_config
from tests.support.services import free_port, require_command
from tests.support.sim_serve import SimProcess, sim_serve

pytestmark = [pytest.mark.service("haproxy"), pytest.mark.asyncio]

INSTANCE = VllmInstance(name="main", url="http://127.0.0.1:1")


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with sim_serve(tmp_path_factory.mktemp("sim"), "max-num-seqs: 8\n") as server:
        yield server


@contextmanager
def gate(directory: Path, sim: SimProcess, maxconn: int) -> Iterator[Haproxy]:
    executable = require_command("haproxy")
    socket_path = directory / "haproxy.sock"
    config = render_reference_config(
        frontend_port=free_port(),
        server_port=sim.port,
        stats_socket=socket_path,
        maxconn=maxconn,
    )
    with Haproxy(executable, directory, config, socket_path) as haproxy:
        yield haproxy


def runtime_of(haproxy: Haproxy) -> HaproxyGate:
    settings = GateSettings(
        enabled=True,
        stats_socket=str(haproxy.stats_socket),
        backend=BACKEND,
        server=SERVER,
        interval_s=1.0,
        timeout_s=1.0,
        stale_after_s=5.0,
    )
    return HaproxyGate(settings)


def change(cap: int, max_cap: int = 8) -> ChangeRequest:
    return cap_request("main", "admission-cap", cap, max_cap, "test")


class Gated:
    """The actuator on one gate, as the engine builds it, and its cap journal."""

    def __init__(self, directory: Path) -> None:
        self.journal = SqliteCapJournal(directory / "gate.sqlite3", SystemClock())
        self.changes = SqliteJournal(directory / "gate.sqlite3", SystemClock())
        self.gate: HaproxyGate | None = None
        self.actuator = HaproxyActuator(
            self.journal, SystemClock(), directory, gates=lambda _: self.gate, changes=self.changes
        )

    async def set_cap(
        self, instance: VllmInstance, gate: HaproxyGate, request: ChangeRequest
    ) -> CapResult:
        """One change through the actuator protocol's ``apply``, as the gate's outcome."""
        self.gate = gate
        return CapResult.of(await self.actuator.apply(instance, request))

    def close(self) -> None:
        self.changes.close()
        self.journal.close()


def maxconn(haproxy: Haproxy) -> int:
    return int(haproxy.stat(BACKEND, SERVER)["slim"])


async def test_a_cap_is_set_live_read_back_and_journaled_once(
    sim: SimProcess, short_tmp: Path
) -> None:
    actuator = Gated(short_tmp)
    journal = actuator.journal
    with gate(short_tmp, sim, maxconn=8) as haproxy:
        runtime = runtime_of(haproxy)
        result = await actuator.set_cap(INSTANCE, runtime, change(3))
        assert (result.state, result.before, result.after) == (CAP_APPLIED, 8, 3)
        assert maxconn(haproxy) == 3
        again = await actuator.set_cap(INSTANCE, runtime, change(3))
        assert again.state == CAP_UNCHANGED
    rows = journal.recent("main")
    assert [(r["state"], r["before"], r["after"], r["reason"]) for r in rows] == [
        ("applied", 8, 3, "test")
    ]
    actuator.close()


@pytest.mark.parametrize(
    ("cap", "max_cap", "why"),
    [(9, 8, "outside its envelope [1, 8]"), (0, 8, "outside its envelope [1, 8]")],
)
async def test_a_cap_outside_the_bounds_is_refused_and_nothing_is_sent(
    sim: SimProcess, short_tmp: Path, cap: int, max_cap: int, why: str
) -> None:
    actuator = Gated(short_tmp)
    journal = actuator.journal
    with gate(short_tmp, sim, maxconn=5) as haproxy:
        result = await actuator.set_cap(INSTANCE, runtime_of(haproxy), change(cap, max_cap))
        assert result.state == CAP_REFUSED
        assert why in result.outcome
        assert maxconn(haproxy) == 5
    assert journal.recent("main") == []
    actuator.close()


async def test_a_freeze_holds_the_cap_until_it_expires(sim: SimProcess, short_tmp: Path) -> None:
    actuator = Gated(short_tmp)
    freeze = short_tmp / "freeze.main"
    with gate(short_tmp, sim, maxconn=8) as haproxy:
        runtime = runtime_of(haproxy)
        freeze.write_text("incident 42\n")
        frozen = await actuator.set_cap(INSTANCE, runtime, change(2))
        assert frozen.state == CAP_REFUSED
        assert "freeze.main" in frozen.outcome
        assert maxconn(haproxy) == 8
        past = datetime.now(UTC) - timedelta(minutes=1)
        freeze.write_text(f"{past.isoformat()}\n")
        thawed = await actuator.set_cap(INSTANCE, runtime, change(2))
        assert thawed.state == CAP_APPLIED
        assert maxconn(haproxy) == 2
    actuator.close()


async def test_a_dry_run_instance_is_never_changed(sim: SimProcess, short_tmp: Path) -> None:
    actuator = Gated(short_tmp)
    dry = VllmInstance(name="main", url="http://127.0.0.1:1", mode="dry-run")
    with gate(short_tmp, sim, maxconn=8) as haproxy:
        result = await actuator.set_cap(dry, runtime_of(haproxy), change(2))
        assert result.state == CAP_REFUSED
        assert "dry-run" in result.outcome
        assert maxconn(haproxy) == 8
    actuator.close()


async def test_haproxy_down_is_a_refusal_with_nothing_journaled(
    sim: SimProcess, short_tmp: Path
) -> None:
    actuator = Gated(short_tmp)
    journal = actuator.journal
    with gate(short_tmp, sim, maxconn=8) as haproxy:
        runtime = runtime_of(haproxy)
        haproxy.stop()
        result = await actuator.set_cap(INSTANCE, runtime, change(2))
        assert result.state == CAP_REFUSED
        assert "cannot read the cap" in result.outcome
        haproxy.start()
        assert maxconn(haproxy) == 8  # a fresh HAProxy: the configured cap, untouched
    assert journal.recent("main") == []
    actuator.close()
