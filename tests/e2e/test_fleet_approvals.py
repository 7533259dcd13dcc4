"""An approved change in a fleet: the click waits for the fleet freeze as for a freeze file.

Real daemon, supervisord restarting ``sim serve`` under load, a real etcd. The approval-risk
policy proposes; with the fleet frozen (``vllm-governor fleet freeze``) an approval is refused
and the proposal stays pending, with the freeze's reason; unfrozen, the approval runs through
the actuator (which takes the group's restart slot) and the server restarts once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon
from tests.support.etcd import EtcdCluster
from tests.support.retune import approval_config, eventually, finished, journal, unix_user
from tests.support.supervised_sim import SATURATING_WORKLOAD, supervised_sim

pytestmark = [pytest.mark.service("etcd"), pytest.mark.service("supervisord"), pytest.mark.slow]


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", *args, "--config", str(config)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip


def test_an_approval_waits_for_the_fleet_freeze(short_tmp: Path) -> None:
    with (
        EtcdCluster(short_tmp / "etcd") as etcd,
        supervised_sim(short_tmp, "max-num-seqs: 8\n", load=SATURATING_WORKLOAD) as sim,
    ):
        fleet = (
            f"[fleet]\nenabled = true\nendpoints = {json.dumps(etcd.endpoints)}\n"
            'prefix = "/approvals/"\nhost = "host-a"\nlease_ttl_s = 6\nrefresh_s = 0.5\n'
        )
        config = approval_config(short_tmp, sim, [unix_user()], extra=fleet)
        socket = short_tmp / "control.sock"
        frozen = cli(config, "fleet", "freeze", "--reason", "incident 4711", "--for", "10m")
        assert frozen.returncode == 0, frozen.stderr
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")

            def pending() -> dict[str, Any] | None:
                found = call_daemon(socket, "proposals")["proposals"]
                return found[0] if found else None

            proposal = eventually(pending, "a proposal", daemon)
            eventually(lambda: "fleet freezes read" in daemon.log_text() or None, "read", daemon)
            waiting = cli(config, "approve", proposal["id"])
            assert waiting.returncode == 1, waiting.stdout
            assert "refused, now pending: a freeze is in force" in waiting.stdout
            assert "fleet freeze of the fleet until" in waiting.stdout
            assert "incident 4711" in waiting.stdout
            assert journal(short_tmp) == []

            assert cli(config, "fleet", "unfreeze").returncode == 0

            def approved() -> subprocess.CompletedProcess[str] | None:
                answer = cli(config, "approve", proposal["id"])
                return answer if answer.returncode == 0 else None

            # The watch reads the lifted freeze within one refresh: the click goes through.
            answer = eventually(approved, "an approval accepted", daemon)
            assert "accepted, now approved" in answer.stdout
            done = eventually(finished(short_tmp), "the change finished", daemon, 60)
            assert done["state"] == "done", done
            assert sim.spawns() == 2
            # The slot is given back after the journal's last step: wait for it, do not race it.
            eventually(
                lambda: "restart slot given back" in daemon.log_text() or None, "the slot", daemon
            )
