"""The fleet under loss: a real three-member etcd, four real governors over supervised sims.

The four servers are replicas of one group with ``max_unavailable = 1``; the fourth has the
admission gate (HAProxy) in front of it. One cluster and one set of governors serve the whole
matrix (a module fixture, on one xdist worker): each scene leaves every etcd member running.
Each scene's outcome is read from evidence outside the governors' logs: etcd's keys, the
servers' spawn counts (supervisord's), the journals, and HAProxy's cap.

1. One member lost: no effect; a restart goes through, every governor stays registered.
2. A governor killed with SIGKILL holding the group's only slot: its slot and records stay
   until its lease expires; another governor's restart waits for the slot, then goes; the
   dead governor's server is never restarted (no double restart).
3. The majority lost: every governor refuses its restart (the fleet cannot be seen), no server
   restarts, and the gate's cap still moves (a live change); the majority back: the next
   restart goes ahead.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from daemon.fleet.etcd_gateway import EtcdGateway
from tests.support.daemon import RunningDaemon, running_daemon
from tests.support.etcd import EtcdCluster
from tests.support.haproxy import BACKEND, SERVER, Haproxy, gate_in_front
from tests.support.retune import eventually, governor_config, journal
from tests.support.supervised_sim import SupervisedSim, supervised_sim

pytestmark = [
    pytest.mark.service("etcd"),
    pytest.mark.service("supervisord"),
    pytest.mark.service("haproxy"),
    pytest.mark.slow,
    pytest.mark.xdist_group("fleet_chaos"),  # one fixture for the module: one worker
]

GOVERNORS = 4
GATED = 3  # the governor whose server has the admission gate in front
PREFIX = "/chaos/"
LEASE_TTL_S = 6  # short: the dead holder's slot frees within seconds; no false alarms under load
MAX_NUM_SEQS = 8

RESTART = """\
name: {name}
targets: [sim]
when: waiting >= 0.0
action: {{operation: restart, risk: auto}}
cooldown: 1h
"""


@dataclass
class Member:
    """One governor of the fleet and the server it governs."""

    host: str
    directory: Path
    sim: SupervisedSim
    daemon: RunningDaemon

    def restart(self, name: str) -> None:
        """Load a restart policy that fires at once (each name has a cooldown of its own)."""
        (self.directory / "policies" / f"{name}.yaml").write_text(RESTART.format(name=name))
        self.daemon.signal(signal.SIGHUP)

    def answer(self, count: int) -> dict[str, Any]:
        """The journal's ``count``-th finished change, once there is one."""

        def finished() -> list[dict[str, Any]] | None:
            done = [entry for entry in journal(self.directory) if entry["state"] != "open"]
            return done if len(done) >= count else None

        answers = eventually(finished, f"{self.host}: change {count} answered", self.daemon, 90)
        print(f"{self.host} change {count}: {answers[count - 1]['timings']}")  # where time goes
        return answers[count - 1]

    def reads(self) -> int:
        """How many times its fleet watch read etcd after not having read it."""
        return self.daemon.log_text().count("fleet freezes read")

    def has_read(self) -> bool | None:
        return self.reads() > 0 or None

    def losses(self) -> int:
        """How many times its fleet watch found etcd unreadable after a good read."""
        return self.daemon.log_text().count("fleet freezes cannot be read")


@dataclass
class Fleet:
    """The cluster, the gate and the four members."""

    etcd: EtcdCluster
    haproxy: Haproxy
    members: list[Member]

    def keys(self, under: str) -> dict[str, tuple[Any, int]]:
        """Keys under ``PREFIX + under``: their JSON values and leases, read from etcd."""

        async def read() -> dict[str, tuple[Any, int]]:
            client = EtcdGateway(self.etcd.endpoints, timeout_s=3)
            found = await client.get_prefix(f"{PREFIX}{under}")
            return {kv.key.removeprefix(PREFIX): (json.loads(kv.value), kv.lease) for kv in found}

        return asyncio.run(read())

    def living(self) -> list[Member]:
        return [m for m in self.members if m.daemon.process.poll() is None]

    def no_slot_held(self, member: Member) -> None:
        """Wait until no slot is held (one is given back just after its change is journaled)."""
        eventually(lambda: self.keys("slots/") == {} or None, "no slot held", member.daemon)


def member_config(directory: Path, sim: SupervisedSim, endpoints: list[str], host: str) -> Path:
    """A governor of ``sim`` (instance ``sim``, group ``llama``) in the fleet on ``endpoints``."""
    config = governor_config(directory, sim)
    text = config.read_text().replace(
        "verify_window_s = 2.0\n",
        "verify_window_s = 1.0\nrestart_min_interval_s = 0\nrestart_hourly_budget = 10\n",
    )
    text += (
        "[fleet]\nenabled = true\n"
        f"endpoints = {json.dumps(endpoints)}\n"
        f'prefix = "{PREFIX}"\nhost = "{host}"\ngroups = {{ sim = "llama" }}\n'
        "max_unavailable = 1\nslot_wait_s = 60\n"
        f"lease_ttl_s = {LEASE_TTL_S}\nrefresh_s = 0.5\nrequest_timeout_s = 1.0\n"
    )
    config.write_text(text)
    return config


def add_gate(config: Path, socket_path: Path) -> None:
    """Put the admission gate (HAProxy's runtime API) in front of the config's one server."""
    text = config.read_text().replace(
        "[vllm.knobs.max_num_seqs]",
        f'[vllm.gate]\nenabled = true\nstats_socket = "{socket_path}"\nbackend = "{BACKEND}"\n'
        f'server = "{SERVER}"\ninterval_s = 0.5\ntimeout_s = 0.5\nstale_after_s = 2.0\n'
        "[vllm.knobs.max_num_seqs]",
    )
    config.write_text(text)


def cap_changes(directory: Path) -> list[tuple[str, str, int]]:
    """The gate journal: (policy, state, after) of each change of the cap, oldest first."""
    path = directory / "state" / "state.sqlite3"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
        try:
            rows = db.execute("SELECT policy, state, after FROM cap_changes ORDER BY id")
            return [(str(p), str(s), int(a)) for p, s, a in rows]
        except sqlite3.OperationalError:  # no table yet
            return []


def sims_at_once(stack: ExitStack, directories: list[Path]) -> list[SupervisedSim]:
    """One supervised sim in each directory, started and stopped in parallel threads.

    Each waits for its server's ``/health`` (seconds of interpreter start-up); four in a row
    cost four times that, at the start and again at the end of the module.
    """
    starting = [supervised_sim(d, f"max-num-seqs: {MAX_NUM_SEQS}\n") for d in directories]
    with ThreadPoolExecutor(len(starting)) as pool:
        entries = [pool.submit(sim.__enter__) for sim in starting]
        wait(entries)

    def stop_all(*_exc: object) -> None:
        with ThreadPoolExecutor(len(starting)) as pool:
            for sim, entry in zip(starting, entries, strict=True):
                if entry.exception() is None:
                    pool.submit(sim.__exit__, None, None, None)

    stack.push(stop_all)
    return [entry.result() for entry in entries]


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    """Three etcd members, four supervised sims, HAProxy before the fourth, four governors."""
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vg-")))
        etcd = stack.enter_context(EtcdCluster(root / "etcd", size=3))
        directories = [root / f"g{index}" for index in range(GOVERNORS)]
        for directory in directories:
            directory.mkdir()
        sims = sims_at_once(stack, directories)
        haproxy, _port = stack.enter_context(gate_in_front(directories[GATED], sims[GATED].port))
        members: list[Member] = []
        for index, (directory, sim) in enumerate(zip(directories, sims, strict=True)):
            host = f"host-{index}"
            config = member_config(directory, sim, etcd.endpoints, host)
            if index == GATED:
                add_gate(config, directory / "haproxy.sock")
            # The governor that scene 2 kills pauses its changes after their first step, with
            # the slot in hand; it makes no other change.
            hold = {"VLLM_GOVERNOR_TEST_HOLD_AFTER_STEP": "planned:300"} if index == 1 else {}
            daemon = stack.enter_context(running_daemon(config, env=hold))
            members.append(Member(host, directory, sim, daemon))
        for member in members:
            member.daemon.wait_for("READY=1", timeout_s=60)
            eventually(member.has_read, f"{member.host} read the fleet", member.daemon)
        the_fleet = Fleet(etcd, haproxy, members)
        eventually(
            lambda: len(the_fleet.keys("members/")) == GOVERNORS or None,
            "four registered",
            members[0].daemon,
        )
        yield the_fleet


def test_one_member_lost_changes_nothing(fleet: Fleet) -> None:
    first = fleet.members[0]
    fleet.etcd.stop_member(0, kill=True)
    try:
        first.restart("one-member-lost")
        answer = first.answer(1)
        assert answer["state"] == "done", answer
        assert first.sim.spawns() == 2
        assert sorted(fleet.keys("members/")) == [f"members/host-{i}/sim" for i in range(4)]
        fleet.no_slot_held(first)  # given back once verified
    finally:
        fleet.etcd.start_member(0)


def test_a_killed_slot_holder_frees_its_slot_after_its_lease_and_nothing_restarts_twice(
    fleet: Fleet,
) -> None:
    doomed, waiting = fleet.members[1], fleet.members[2]
    doomed.restart("held-then-killed")
    eventually(lambda: fleet.keys("slots/") or None, "host-1 holds the slot", doomed.daemon)
    doomed.daemon.process.kill()
    doomed.daemon.process.wait()
    # The dead holder's lease still runs: its slot and its record stay.
    [(holder, lease)] = fleet.keys("slots/").values()
    assert holder == {"host": "host-1", "instance": "sim"}
    assert lease == fleet.keys("members/host-1/")["members/host-1/sim"][1]

    waiting.restart("after-the-holder-died")
    answer = waiting.answer(1)
    assert answer["state"] == "done", answer  # it waited for the slot, then restarted
    assert waiting.sim.spawns() == 2
    assert doomed.sim.spawns() == 1, "the dead holder's server was never restarted"
    assert [e["state"] for e in journal(doomed.directory)] == ["open"]  # left for its return
    assert "members/host-1/sim" not in fleet.keys("members/")  # its lease expired
    fleet.no_slot_held(waiting)


def test_a_lost_majority_restarts_nothing_keeps_the_gate_and_recovers(fleet: Fleet) -> None:
    living = fleet.living()
    gated = fleet.members[GATED]
    spawns = {m.host: m.sim.spawns() for m in living}
    answered = {
        m.host: len([e for e in journal(m.directory) if e["state"] != "open"]) for m in living
    }
    seen = {m.host: m.reads() for m in living}
    losses = {m.host: m.losses() for m in living}
    fleet.etcd.stop_member(1, kill=True)
    fleet.etcd.stop_member(2, kill=True)
    try:
        for member in living:

            def noticed(m: Member = member) -> bool | None:
                return m.losses() > losses[m.host] or None

            eventually(noticed, f"{member.host} noticed", member.daemon)
            member.restart("majority-lost")
        for member in living:
            answer = member.answer(answered[member.host] + 1)
            assert answer["state"] == "refused", answer
            assert "no restart while a fleet is configured and cannot be seen" in answer["outcome"]
        assert {m.host: m.sim.spawns() for m in living} == spawns  # nothing restarted

        # The gate keeps working: a cap raised past max-num-seqs is clamped back, live.
        clamps = len(cap_changes(gated.directory))
        fleet.haproxy.command(f"set maxconn server {BACKEND}/{SERVER} {MAX_NUM_SEQS + 4}")
        eventually(
            lambda: len(cap_changes(gated.directory)) > clamps or None, "clamped", gated.daemon
        )
        assert cap_changes(gated.directory)[clamps] == ("clamp", "applied", MAX_NUM_SEQS)
        assert int(fleet.haproxy.stat(BACKEND, SERVER)["slim"]) == MAX_NUM_SEQS
    finally:
        fleet.etcd.start_member(1, wait_healthy=False)
        fleet.etcd.start_member(2, wait_healthy=False)
        fleet.etcd.wait_healthy(fleet.etcd.members)

    # The majority back: the next restart goes ahead.
    first = fleet.members[0]
    eventually(lambda: first.reads() > seen[first.host] or None, "reads again", first.daemon)
    first.restart("majority-back")
    answer = first.answer(answered[first.host] + 2)
    assert answer["state"] == "done", answer
    assert first.sim.spawns() == spawns[first.host] + 1
    fleet.no_slot_held(first)
