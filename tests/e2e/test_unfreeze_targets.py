"""``unfreeze`` names a server (or ``--all``), never a path: issue 15, finding 7.

The daemon is a subprocess and the CLI talks to it over its control socket. Before the fix,
``unfreeze x/../../victim`` removed ``STATE_DIR/freeze.x/../../victim`` once a ``freeze.x``
directory existed: a file outside the state directory.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from daemon.app.control_client import call_daemon
from daemon.core.errors import ControlError
from tests.support.daemon import running_daemon, write_config


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", *args, "--config", str(config)],
        capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip


def test_unfreeze_refuses_a_target_that_is_not_a_server(short_tmp: Path) -> None:
    config = write_config(short_tmp, extra='[[vllm]]\nname = "main"\nurl = "http://127.0.0.1:9"\n')
    state = short_tmp / "state"
    victim = short_tmp / "victim"
    victim.write_text("not the governor's to delete\n")
    with running_daemon(config) as daemon:
        daemon.wait_for("READY=1")
        (state / "freeze.x").mkdir()  # the stepping stone the path needs
        refused = cli(config, "unfreeze", "x/../../victim")
        assert refused.returncode == 1
        assert refused.stderr == (
            "vllm-governor: the governor refused 'unfreeze': "
            "no vLLM instance named 'x/../../victim' (known: main; or * for all)\n"
        )
        with pytest.raises(ControlError, match="no vLLM instance named 'nope'"):
            call_daemon(short_tmp / "control.sock", "unfreeze", target="nope")
        assert victim.read_text() == "not the governor's to delete\n"

        # The real targets still work, both ways.
        assert cli(config, "freeze", "main", "--for", "5m", "--reason", "r").returncode == 0
        assert cli(config, "unfreeze", "main").stdout == "unfrozen: main\n"
        assert cli(config, "freeze", "--all", "--for", "5m", "--reason", "r").returncode == 0
        assert cli(config, "unfreeze", "--all").stdout == "unfrozen: every server\n"
        assert daemon.process.poll() is None
