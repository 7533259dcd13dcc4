"""The fleet under loss: a real three-member etcd, two real governors over supervised sims.

Both servers are replicas of one group with ``max_unavailable = 1``. In order:

1. one etcd member killed: no effect; governor B starts a restart, takes the group's one slot,
   and is held there (the actuators' test hook) ...
2. ... and is killed with SIGKILL, slot in hand: governor A's restart waits for the slot, gets
   it once B's lease has expired, and restarts A's server; B's server is never restarted (no
   double restart, nothing down twice);
3. the majority lost: A refuses the next restart (the fleet cannot be seen), touching nothing;
4. the majority back: the next restart goes ahead.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import RunningDaemon, running_daemon
from tests.support.etcd import EtcdCluster
from tests.support.retune import eventually, governor_config, journal
from tests.support.supervised_sim import SupervisedSim, supervised_sim

pytestmark = [pytest.mark.service("etcd"), pytest.mark.service("supervisord"), pytest.mark.slow]

RESTART = """\
name: {name}
targets: [sim]
when: waiting >= 0.0
action: {{operation: restart, risk: auto}}
cooldown: 1h
"""


def member_config(directory: Path, sim: SupervisedSim, endpoints: list[str], host: str) -> Path:
    """A governor of ``sim`` (instance ``sim``, group ``llama``) in the fleet on ``endpoints``."""
    config = governor_config(directory, sim)
    text = config.read_text().replace(
        "verify_window_s = 2.0\n",
        "verify_window_s = 2.0\nrestart_min_interval_s = 0\nrestart_hourly_budget = 10\n",
    )
    text += (
        "[fleet]\nenabled = true\n"
        f"endpoints = {json.dumps(endpoints)}\n"
        f'prefix = "/chaos/"\nhost = "{host}"\ngroups = {{ sim = "llama" }}\n'
        "max_unavailable = 1\nslot_wait_s = 60\n"
        "lease_ttl_s = 8\nrefresh_s = 0.5\nrequest_timeout_s = 1.0\n"
    )
    config.write_text(text)
    return config


def add_policy(directory: Path, daemon: RunningDaemon, name: str) -> None:
    (directory / "policies" / f"{name}.yaml").write_text(RESTART.format(name=name))
    daemon.signal(signal.SIGHUP)


def nth_answer(directory: Path, daemon: RunningDaemon, count: int) -> dict[str, Any]:
    def finished() -> list[dict[str, Any]] | None:
        done = [entry for entry in journal(directory) if entry["state"] != "open"]
        return done if len(done) >= count else None

    return eventually(finished, f"change {count} answered", daemon, timeout_s=90)[count - 1]


def fleet_status(config: Path) -> dict[str, Any]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "daemon.app.cli",
            "fleet",
            "status",
            "--json",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def reads(daemon: RunningDaemon) -> int:
    return daemon.log_text().count("fleet freezes read")


def test_member_loss_a_killed_slot_holder_and_a_lost_majority(short_tmp: Path) -> None:
    dir_a, dir_b = short_tmp / "a", short_tmp / "b"
    dir_a.mkdir()
    dir_b.mkdir()
    with (
        EtcdCluster(short_tmp / "etcd", size=3) as etcd,
        supervised_sim(dir_a, "max-num-seqs: 8\n") as sim_a,
        supervised_sim(dir_b, "max-num-seqs: 8\n") as sim_b,
    ):
        config_a = member_config(dir_a, sim_a, etcd.endpoints, "host-a")
        config_b = member_config(dir_b, sim_b, etcd.endpoints, "host-b")
        hold = {"VLLM_GOVERNOR_TEST_HOLD_AFTER_STEP": "planned:300"}
        with running_daemon(config_a) as a, running_daemon(config_b, env=hold) as b:
            a.wait_for("READY=1")
            b.wait_for("READY=1")
            eventually(lambda: reads(a) or None, "A read the fleet", a)
            eventually(lambda: reads(b) or None, "B read the fleet", b)

            # 1. One member of three lost: B's restart takes the slot (and is held there).
            etcd.stop_member(0, kill=True)
            add_policy(dir_b, b, "restart-b")
            eventually(lambda: "restart slot taken" in b.log_text() or None, "B holds the slot", b)

            # 2. B killed with the slot in hand: A waits, then restarts once B's lease is over.
            b.process.kill()
            b.process.wait()
            held = fleet_status(config_a)["slots"]  # the dead holder's lease still runs
            assert [(slot["slot"], slot["holder"]) for slot in held] == [("llama/0", "host-b/sim")]
            add_policy(dir_a, a, "restart-a1")
            first = nth_answer(dir_a, a, 1)
            assert first["state"] == "done", first
            assert sim_a.spawns() == 2
            assert sim_b.spawns() == 1, "B's server was never restarted: B died before it"
            assert [e["state"] for e in journal(dir_b)] == ["open"]  # B's, left for its return

            # 3. The majority lost: no restart, nothing touched.
            seen = reads(a)
            etcd.stop_member(1, kill=True)
            eventually(lambda: "fleet freezes cannot be read" in a.log_text() or None, "noticed", a)
            add_policy(dir_a, a, "restart-a2")
            second = nth_answer(dir_a, a, 2)
            assert second["state"] == "refused", second
            assert "no restart while a fleet is configured and cannot be seen" in second["outcome"]
            assert sim_a.spawns() == 2

            # 4. The majority back: the next restart goes ahead.
            etcd.start_member(0, wait_healthy=False)
            etcd.start_member(1, wait_healthy=False)
            etcd.wait_healthy(etcd.members)
            eventually(lambda: reads(a) > seen or None, "A reads the fleet again", a)
            add_policy(dir_a, a, "restart-a3")
            third = nth_answer(dir_a, a, 3)
            assert third["state"] == "done", third
            assert sim_a.spawns() == 3
        assert sim_b.spawns() == 1
