"""The fleet freeze end to end: a real governor over a supervised ``sim serve``, a real etcd.

A policy asks for a restart (risk auto) as soon as it is loaded. Frozen with ``vllm-governor
fleet freeze``, the governor refuses it with the freeze's reason; with etcd gone, it refuses the
next one because the fleet's state is unknown (fail safe); with etcd back, the third goes
ahead. One restart in all, counted at the server.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import RunningDaemon, running_daemon
from tests.support.etcd import EtcdCluster
from tests.support.retune import eventually, governor_config, journal
from tests.support.supervised_sim import supervised_sim

pytestmark = [pytest.mark.service("etcd"), pytest.mark.service("supervisord"), pytest.mark.slow]

RESTART = """\
name: {name}
targets: [sim]
when: waiting >= 0.0
action: {{operation: restart, risk: auto}}
cooldown: 1h
"""


def fleet(config: Path, endpoints: list[str]) -> None:
    """Make the governor of ``config`` a member of the fleet on ``endpoints``."""
    with config.open("a", encoding="utf-8") as file:
        file.write(
            "[fleet]\nenabled = true\n"
            f"endpoints = {json.dumps(endpoints)}\n"
            'prefix = "/test-fleet/"\nhost = "host-a"\n'
            "lease_ttl_s = 3\nrefresh_s = 0.5\nrequest_timeout_s = 1.0\n"
        )


def fleet_cli(config: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "fleet", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def add_policy(directory: Path, daemon: RunningDaemon, name: str) -> None:
    (directory / "policies" / f"{name}.yaml").write_text(RESTART.format(name=name))
    daemon.signal(signal.SIGHUP)


def answered(directory: Path, daemon: RunningDaemon, count: int) -> list[dict[str, Any]]:
    def finished() -> list[dict[str, Any]] | None:
        done = [entry for entry in journal(directory) if entry["state"] != "open"]
        return done if len(done) >= count else None

    return eventually(finished, f"{count} change(s) answered", daemon, timeout_s=60)


def test_a_fleet_freeze_and_an_unseen_fleet_hold_restarts(short_tmp: Path) -> None:
    with (
        EtcdCluster(short_tmp / "etcd") as etcd,
        supervised_sim(short_tmp, "max-num-seqs: 8\n") as sim,
    ):
        config = governor_config(short_tmp, sim)
        fleet(config, etcd.endpoints)
        frozen = fleet_cli(config, "freeze", "--reason", "incident 4711", "--for", "10m")
        assert frozen.startswith("frozen: the whole fleet until ")
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            # Until its first read of etcd the governor holds restarts (the fleet is unseen):
            # the policy comes once the freeze has been read.
            eventually(lambda: "fleet freezes read" in daemon.log_text() or None, "read", daemon)
            add_policy(short_tmp, daemon, "restart-a")
            [first] = answered(short_tmp, daemon, 1)
            assert first["state"] == "refused", first
            assert "refused (frozen): fleet freeze of the fleet until" in first["outcome"]
            assert "incident 4711 (by " in first["outcome"]
            assert "frozen: the whole fleet until " in fleet_cli(config, "status")
            member = call_daemon(short_tmp / "control.sock", "status")["fleet"]
            assert (member["host"], member["registered"]) == ("host-a", True)
            assert member["freeze_watch"]["seen"] is True
            assert member["freeze_watch"]["freezes"] == 1

            assert fleet_cli(config, "unfreeze") == "unfrozen: the whole fleet\n"
            etcd.stop_member(0)  # and the fleet can no longer be seen
            eventually(
                lambda: "fleet freezes cannot be read" in daemon.log_text() or None,
                "the governor noticed",
                daemon,
            )
            shown = subprocess.run(
                [sys.executable, "-m", "daemon.app.cli", "status", "--config", str(config)],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            ).stdout
            assert "fleet: host-a on http://127.0.0.1:" in shown
            assert "fleet NOT seen, no restarts (read " in shown
            add_policy(short_tmp, daemon, "restart-b")
            second = answered(short_tmp, daemon, 2)[1]
            assert second["state"] == "refused", second
            assert "fleet state unknown" in second["outcome"]
            assert "no restart while a fleet is configured and cannot be seen" in second["outcome"]

            reads = daemon.log_text().count("fleet freezes read")
            etcd.start_member(0)
            eventually(
                lambda: daemon.log_text().count("fleet freezes read") > reads or None,
                "the governor read the fleet again",
                daemon,
            )
            add_policy(short_tmp, daemon, "restart-c")
            third = answered(short_tmp, daemon, 3)[2]
            assert third["state"] == "done", third
        assert sim.spawns() == 2, "one restart: the one after the fleet could be seen again"
