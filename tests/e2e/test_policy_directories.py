"""A policy directory the daemon cannot read, or that is gone: the policies in force stay.

Issue 15, finding 5. The daemon runs as a subprocess; an unreadable directory is a real
``chmod 000`` one, read by a daemon that has no permission bypass (``setpriv`` drops root's
``CAP_DAC_OVERRIDE`` and ``CAP_DAC_READ_SEARCH``, see :func:`without_permission_bypass`).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.app.control_client import call_daemon
from daemon.core.errors import DaemonNotRunningError
from tests.support.daemon import RunningDaemon, running_daemon, without_permission_bypass
from tests.support.daemon import write_config as write_daemon_config

CALM = """\
name: calm
description: Never fires; it is here to be kept.
targets: [main]
when: kv_usage > 2.0
action:
  set: {max_num_seqs: "current * 0.5"}
"""


@pytest.fixture
def policies(short_tmp: Path) -> Iterator[Path]:
    directory = short_tmp / "policies"
    directory.mkdir()
    (directory / "calm.yaml").write_text(CALM)
    yield directory
    if directory.exists():
        directory.chmod(0o755)  # so that the temporary directory can go


def write_config(short_tmp: Path, policies: Path) -> Path:
    config = write_daemon_config(
        short_tmp, extra='[[vllm]]\nname = "main"\nurl = "http://127.0.0.1:9"\n'
    )
    text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
    config.write_text(text)
    return config


def rejected_reloads(config: Path) -> float:
    port = next(
        line.split("=")[1].strip()
        for line in config.read_text().splitlines()
        if line.startswith("listen_port")
    )
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        page = response.read().decode()
    prefix = 'vllm_governor_config_reloads_total{outcome="rejected"} '
    values = [float(line[len(prefix) :]) for line in page.splitlines() if line.startswith(prefix)]
    return values[0] if values else 0.0


def eventually(check: Callable[[], Any], what: str, daemon: RunningDaemon) -> Any:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        assert daemon.process.poll() is None, f"the daemon ended:\n{daemon.log_text()}"
        with contextlib.suppress(DaemonNotRunningError):  # it may be on its way out
            if result := check():
                return result
        time.sleep(0.2)
    raise AssertionError(f"not seen in time: {what}\n{daemon.log_text()}")


def policy_names(socket: Path) -> list[str]:
    return [p["name"] for p in call_daemon(socket, "status")["policies"]]


def rejections_naming(daemon: RunningDaemon, directory: Path) -> list[dict[str, Any]]:
    return [
        r
        for r in daemon.log_records()
        if r["level"] in ("warning", "error") and str(directory) in r.get("where", "")
    ]


def test_an_unreadable_policy_directory_keeps_the_policies_in_force(
    short_tmp: Path, policies: Path
) -> None:
    config = write_config(short_tmp, policies)
    socket = short_tmp / "control.sock"
    with running_daemon(config, wrapper=without_permission_bypass()) as daemon:
        daemon.wait_for("READY=1")
        assert policy_names(socket) == ["calm"]
        policies.chmod(0o000)
        # The watcher notices by itself (every 2 s), without a signal.
        error = eventually(
            lambda: call_daemon(socket, "status")["last_reload_error"], "a rejection", daemon
        )
        assert f"{policies}:0:0: cannot read it: Permission denied" in error
        assert rejected_reloads(config) == 1
        assert policy_names(socket) == ["calm"]

        daemon.signal(signal.SIGHUP)
        daemon.wait_for("RELOADING=1")
        assert "reload rejected" in daemon.wait_for("READY=1")
        assert daemon.process.poll() is None
        assert policy_names(socket) == ["calm"]
        assert rejected_reloads(config) == 2
        logged = rejections_naming(daemon, policies)
        assert len(logged) == 2, daemon.log_text()
        assert all("Permission denied" in r["where"] for r in logged)

        policies.chmod(0o755)
        eventually(
            lambda: call_daemon(socket, "status")["last_reload_error"] == "",
            "the readable directory taken back",
            daemon,
        )
        assert policy_names(socket) == ["calm"]
        assert rejected_reloads(config) == 2


def test_a_removed_policy_directory_keeps_the_policies_in_force(
    short_tmp: Path, policies: Path
) -> None:
    config = write_config(short_tmp, policies)
    socket = short_tmp / "control.sock"
    with running_daemon(config) as daemon:
        daemon.wait_for("READY=1")
        shutil.rmtree(policies)
        daemon.signal(signal.SIGHUP)
        daemon.wait_for("RELOADING=1")
        assert "reload rejected" in daemon.wait_for("READY=1")
        assert policy_names(socket) == ["calm"]
        error = call_daemon(socket, "status")["last_reload_error"]
        assert f"{policies}:0:0: no such file or directory" in error
        assert rejected_reloads(config) >= 1
        assert rejections_naming(daemon, policies), daemon.log_text()
        loaded = [r for r in daemon.log_records() if r["msg"] == "policies loaded"]
        assert loaded == [], "no set, empty or not, replaced the one in force"


@pytest.mark.parametrize("problem", ["unreadable", "missing"])
def test_a_fresh_start_without_a_readable_policy_directory_exits_78(
    short_tmp: Path, policies: Path, problem: str
) -> None:
    config = write_config(short_tmp, policies)
    if problem == "unreadable":
        policies.chmod(0o000)
        expected = f"{policies}:0:0: cannot read it: Permission denied"
    else:
        shutil.rmtree(policies)
        expected = f"{policies}:0:0: no such file or directory"
    command = [sys.executable, "-m", "daemon.app.cli", "run", "--config", str(config)]
    result = subprocess.run(
        [*without_permission_bypass(), *command],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert result.returncode == 78, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(expected)
