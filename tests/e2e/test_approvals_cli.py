"""An approval-risk policy proposes; a person approves with the CLI; the server restarts with it.

Everything is real: the daemon is a subprocess, supervisord restarts ``sim serve`` under load,
the policy fires on the signals the daemon scrapes, and the CLI talks to the daemon over its
control socket. Before the approval nothing changes; a freeze makes the approval wait; the
approval then runs through the actuator like any automatic change.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon
from tests.support.retune import approval_config, eventually, finished, journal, unix_user
from tests.support.supervised_sim import SATURATING_WORKLOAD, supervised_sim

pytestmark = [pytest.mark.service("supervisord"), pytest.mark.slow]


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", *args, "--config", str(config)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip


def test_a_cli_approval_restarts_the_server_with_the_new_value(short_tmp: Path) -> None:
    with supervised_sim(short_tmp, "max-num-seqs: 8\n", load=SATURATING_WORKLOAD) as sim:
        config = approval_config(short_tmp, sim, [unix_user()])
        socket = short_tmp / "control.sock"
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")

            def pending() -> dict[str, Any] | None:
                found = call_daemon(socket, "proposals")["proposals"]
                return found[0] if found else None

            proposal = eventually(pending, "a proposal", daemon)
            assert proposal["state"] == "pending"
            assert proposal["changes"] == {"max_num_seqs": {"old": 8.0, "new": 16.0}}
            assert journal(short_tmp) == [], "nothing is applied before a person decides"
            status = call_daemon(socket, "status")
            assert [p["id"] for p in status["proposals"]] == [proposal["id"]]
            shown = cli(config, "proposals")
            assert f"{proposal['id']}  pending" in shown.stdout, shown.stdout

            frozen = cli(config, "freeze", "sim", "--for", "10m", "--reason", "load test")
            assert frozen.returncode == 0, frozen.stderr
            waiting = cli(config, "approve", proposal["id"])
            assert waiting.returncode == 1
            assert "refused, now pending: a freeze is in force" in waiting.stdout
            assert "load test" in waiting.stdout
            assert cli(config, "unfreeze", "sim").stdout.strip() == "unfrozen: sim"

            approved = cli(config, "approve", proposal["id"])
            assert approved.returncode == 0, approved.stdout + approved.stderr
            assert "accepted, now approved" in approved.stdout
            done = eventually(finished(short_tmp), "the change finished", daemon, 60)
            assert done["state"] == "done", done
            assert sim.vllm_yaml.read_text().endswith("max-num-seqs: 16\n")
            assert sim.spawns() == 2

            def verified() -> dict[str, Any] | None:
                [listed] = call_daemon(socket, "proposals")["proposals"]
                return listed if listed["state"] == "verified" else None

            listed = eventually(verified, "the proposal verified", daemon)
            assert [(v["user"], v["action"], v["via"]) for v in listed["votes"]] == [
                (unix_user(), "approve", "cli")
            ]
            again = cli(config, "approve", proposal["id"])
            assert again.returncode == 1
            assert "already verified" in again.stdout
            rejected = cli(config, "reject", "pnothere00", "--reason", "x")
            assert rejected.returncode == 1
            assert rejected.stderr == (
                "vllm-governor: no proposal 'pnothere00' (list them with 'vllm-governor proposals')\n"
            )
    assert len(journal(short_tmp)) == 1
