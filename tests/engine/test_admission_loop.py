"""The admission loop: it steps a firing policy's controller, never sets a cap above
max-num-seqs, opens the gate back when the policy stops, and sends nothing on stale data.

The signals are rows as the signal plane gives them; the gate is an in-memory one behind the
real HAProxy actuator and cap journal (the real HAProxy is tests/e2e/test_admission_gate.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from actuators.haproxy.actuator import HaproxyActuator
from daemon.core.actuation import DONE
from daemon.core.settings import GovernorConfig
from daemon.engine.actuation.admission_loop import AdmissionLoop
from daemon.engine.storage.cap_journal import SqliteCapJournal
from daemon.engine.storage.journal_store import SqliteJournal
from daemon.policy.loading import parse_policy
from daemon.policy.spec import PolicySpec
from daemon.policy.state import Phase, PolicyState
from daemon.sources.view import NO_DATA, OK, SignalRow

pytestmark = pytest.mark.asyncio

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "admission-cap.yaml"
KEY = ("admission-cap", "main")
# Inside vLLM: TTFT p95 three times its 1 s budget, so slo-band cuts. TPOT is each request's
# (request_tpot_p95_s), as the admission controllers read it since 1cc203e.
HOT = {
    "ttft_p95_s": 3.0,
    "request_tpot_p95_s": 0.03,
    "preemptions_per_s": 0.0,
    "ttft_p50_s": 1.0,
}
CALM = {
    "ttft_p95_s": 0.2,
    "request_tpot_p95_s": 0.03,
    "preemptions_per_s": 0.0,
    "ttft_p50_s": 0.1,
}


@dataclass
class Clock:
    now: float = 1000.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@dataclass
class Gate:
    cap: int
    writes: list[int] = field(default_factory=list)

    @property
    def where(self) -> str:
        return "memory vllm/main"

    async def read_cap(self) -> int | None:
        return self.cap

    async def write_cap(self, cap: int) -> int | None:
        self.writes.append(cap)
        self.cap = cap
        return cap


@dataclass
class World:
    """What the loop reads: rows, knobs, policies and their states."""

    gate: Gate
    max_num_seqs: float | None = 64.0
    fresh: bool = True
    vllm: dict[str, float] = field(default_factory=lambda: dict(HOT))
    in_flight: float = 60.0
    queued: float = 20.0
    specs: list[PolicySpec] = field(default_factory=list)
    states: dict[tuple[str, str], PolicyState] = field(default_factory=dict)
    windows: list[float] = field(default_factory=list)  # each read's window, in order

    def rows(self, window_s: float, only: frozenset[str]) -> Sequence[SignalRow]:
        """What the signal plane would give: the signals asked for, nothing else."""
        self.windows.append(window_s)
        gate = {"gate_cap": float(self.gate.cap), "gate_in_flight": self.in_flight}
        values = {**gate, "gate_queue": self.queued, **self.vllm}
        rows = []
        for name, value in values.items():
            if name not in only:
                continue
            ok = self.fresh or not name.startswith("gate_")
            state, shown = (OK, value) if ok else (NO_DATA, None)
            rows.append(SignalRow(name, "main", {}, shown, "test", 0.0, state))
        return rows

    def knobs(self) -> dict[str, dict[str, float]]:
        if self.max_num_seqs is None:
            return {"main": {}}
        return {"main": {"max_num_seqs": self.max_num_seqs}}

    def fire(self, *, firing: bool = True) -> None:
        phase = Phase.FIRING if firing else Phase.INACTIVE
        self.states[KEY] = PolicyState(phase, 0.0)


def config() -> GovernorConfig:
    return GovernorConfig.model_validate(
        {"vllm": [{"name": "main", "url": "http://127.0.0.1:1", "gate": {"enabled": True}}]}
    )


@pytest.fixture
def changes(tmp_path: Path) -> Iterator[SqliteJournal]:
    """The engine's journal of changes, which the gate's preflight reads (one in flight)."""
    journal = SqliteJournal(tmp_path / "state.sqlite3", Clock())
    yield journal
    journal.close()


def make_loop(
    world: World, tmp_path: Path, clock: Clock, changes: SqliteJournal
) -> tuple[AdmissionLoop, SqliteCapJournal]:
    journal = SqliteCapJournal(tmp_path / "gate.sqlite3", clock)
    world.specs = [parse_policy(POLICY.read_text(), POLICY)]
    actuator = HaproxyActuator(
        journal, clock, tmp_path, gates=lambda _instance: world.gate, changes=changes
    )
    loop = AdmissionLoop(
        config=config,
        specs=lambda: world.specs,
        states=lambda: world.states,
        rows=world.rows,
        knobs=world.knobs,
        gates={"main": world.gate.where},
        actuator=actuator,
        clock=clock,
        registry=CollectorRegistry(),
    )
    return loop, journal


async def test_a_firing_policy_cuts_the_cap_and_steps_at_its_interval(
    tmp_path: Path, changes: SqliteJournal
) -> None:
    world, clock = World(Gate(64)), Clock()
    loop, journal = make_loop(world, tmp_path, clock, changes)
    world.fire()
    await loop.tick_once()
    assert len(world.gate.writes) == 1
    assert 4 <= world.gate.cap < 60  # cut below what was in flight, never under min_cap
    clock.now += 1.0  # half of `every: 2s`: no step
    await loop.tick_once()
    assert len(world.gate.writes) == 1
    assert [row["policy"] for row in journal.recent("main")] == ["admission-cap"]
    status = loop.status()["main"]
    assert (status["policy"], status["controller"]) == ("admission-cap", "slo-band")
    journal.close()


async def test_the_cap_never_exceeds_max_num_seqs_even_when_it_drops(
    tmp_path: Path, changes: SqliteJournal
) -> None:
    world, clock = World(Gate(64), vllm=dict(CALM), in_flight=64.0, queued=50.0), Clock()
    loop, journal = make_loop(world, tmp_path, clock, changes)
    world.fire()
    for _ in range(10):  # calm with a queue: slo-band grows, up to max-num-seqs at most
        await loop.tick_once()
        clock.now += 2.5
        assert world.gate.cap <= 64
    world.max_num_seqs = 32.0  # an approved restart lowered it
    await loop.tick_once()
    assert world.gate.cap == 32
    assert journal.recent("main")[0]["policy"] == "clamp"
    journal.close()


async def test_when_the_policy_stops_firing_the_gate_opens_back(
    tmp_path: Path, changes: SqliteJournal
) -> None:
    world, clock = World(Gate(64)), Clock()
    loop, journal = make_loop(world, tmp_path, clock, changes)
    world.fire()
    await loop.tick_once()
    assert world.gate.cap < 64
    world.fire(firing=False)
    clock.now += 2.5
    await loop.tick_once()
    assert world.gate.cap == 64
    assert journal.recent("main")[0]["policy"] == "restore"
    journal.close()


async def test_a_policy_removed_on_reload_opens_the_gate_back(
    tmp_path: Path, changes: SqliteJournal
) -> None:
    world, clock = World(Gate(64)), Clock()
    loop, journal = make_loop(world, tmp_path, clock, changes)
    world.fire()
    await loop.tick_once()
    assert world.gate.cap < 64
    world.specs, world.states = [], {}
    clock.now += 2.5
    await loop.tick_once()
    assert world.gate.cap == 64
    journal.close()


async def test_a_stale_gate_gets_nothing_sent_and_status_says_why(
    tmp_path: Path, changes: SqliteJournal
) -> None:
    world, clock = World(Gate(64), fresh=False), Clock()
    loop, journal = make_loop(world, tmp_path, clock, changes)
    world.fire()
    for _ in range(3):
        await loop.tick_once()
        clock.now += 2.5
    assert world.gate.writes == []
    assert "no fresh gate_cap" in loop.status()["main"]["hold"]
    world.fresh = True  # HAProxy back: the loop acts again
    await loop.tick_once()
    assert len(world.gate.writes) == 1
    journal.close()


async def test_unknown_max_num_seqs_holds(tmp_path: Path, changes: SqliteJournal) -> None:
    world, clock = World(Gate(64), max_num_seqs=None), Clock()
    loop, journal = make_loop(world, tmp_path, clock, changes)
    world.fire()
    await loop.tick_once()
    assert world.gate.writes == []
    assert "max_num_seqs unknown" in loop.status()["main"]["hold"]
    journal.close()


async def test_stale_vllm_signals_make_the_controller_hold(
    tmp_path: Path, changes: SqliteJournal
) -> None:
    world, clock = World(Gate(64), vllm={}), Clock()
    loop, journal = make_loop(world, tmp_path, clock, changes)
    world.fire()
    await loop.tick_once()
    assert world.gate.writes == []
    assert "no fresh" in loop.status()["main"]["last_step"]
    journal.close()


async def test_a_shadow_policy_never_moves_the_gate(tmp_path: Path, changes: SqliteJournal) -> None:
    world, clock = World(Gate(48)), Clock()
    loop, journal = make_loop(world, tmp_path, clock, changes)
    shadow = POLICY.read_text().replace("mode: active", "mode: shadow")
    world.specs = [parse_policy(shadow, POLICY)]
    world.fire()
    await loop.tick_once()
    assert world.gate.writes == []  # neither stepped nor "restored": not its gate to manage
    journal.close()


async def test_a_freeze_holds_the_cap_and_is_not_journaled(
    tmp_path: Path, changes: SqliteJournal
) -> None:
    world, clock = World(Gate(64)), Clock()
    loop, journal = make_loop(world, tmp_path, clock, changes)
    (tmp_path / "freeze").write_text("")
    world.fire()
    for _ in range(3):
        await loop.tick_once()
        clock.now += 2.5
    assert world.gate.writes == []
    assert journal.recent("main") == []
    assert loop.status()["main"]["last_change"]["state"] == "refused"
    journal.close()


async def test_a_restart_in_flight_holds_the_cap_until_it_ends(
    tmp_path: Path, changes: SqliteJournal
) -> None:
    # One change in flight per instance, on the gate's path too: while the engine's journal
    # holds an open change of the server (a restart), the cap is not moved.
    world, clock = World(Gate(64)), Clock()
    loop, journal = make_loop(world, tmp_path, clock, changes)
    restart = changes.begin("main", "seqs-cut", {"knobs": {"max_num_seqs": [64, 48]}}, {})
    world.fire()
    await loop.tick_once()
    assert world.gate.writes == []
    held = loop.status()["main"]["last_change"]
    assert held["state"] == "refused"
    assert "another change of main is in flight" in held["outcome"]
    assert journal.recent("main") == []
    changes.finish(restart.id, DONE, "verified", {})
    for _ in range(10):  # the controller steps again at its interval, and is heard now
        clock.now += 2.5
        await loop.tick_once()
    assert world.gate.writes
    assert world.gate.cap < 64
    journal.close()


async def test_a_steered_gate_reads_its_signals_over_its_controllers_window(
    tmp_path: Path, changes: SqliteJournal
) -> None:
    world, clock = World(Gate(64)), Clock()
    loop, journal = make_loop(world, tmp_path, clock, changes)
    await loop.tick_once()  # not firing: the cap alone, over any window
    world.fire()
    await loop.tick_once()  # the shipped policy's slo-band settles for 60 s: its window
    text = POLICY.read_text().replace("settle_s: 60", "settle_s: 25")
    world.specs = [parse_policy(text, POLICY)]
    clock.now += 2.5
    await loop.tick_once()
    assert world.windows[1:] == [60.0, 25.0]
    journal.close()
