"""The governor daemon as a real subprocess, with a real datagram socket as NOTIFY_SOCKET."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.services import free_port


def write_config(directory: Path, *, extra: str = "", deadline_s: float = 5.0) -> Path:
    """A valid config.toml whose sockets and state live in ``directory``."""
    path = directory / "config.toml"
    path.write_text(
        "[governor]\n"
        f'state_dir = "{directory / "state"}"\n'
        "policy_dirs = []\n"
        f"shutdown_deadline_s = {deadline_s}\n"
        "[control]\n"
        f'socket_path = "{directory / "control.sock"}"\n'
        "[metrics]\n"
        'listen_host = "127.0.0.1"\n'
        f"listen_port = {free_port()}\n"
        "[logging]\n"
        'level = "DEBUG"\n' + extra,
        encoding="utf-8",
    )
    return path


@dataclass
class RunningDaemon:
    """A started ``vllm-governor run`` and what systemd would hear from it."""

    process: subprocess.Popen[bytes]
    notify: socket.socket
    log_path: Path
    messages: list[str] = field(default_factory=list)

    def receive(self, timeout_s: float) -> str | None:
        """The next sd_notify datagram, or None after ``timeout_s``."""
        self.notify.settimeout(timeout_s)
        try:
            message = self.notify.recv(4096).decode()
        except TimeoutError:
            return None
        self.messages.append(message)
        return message

    def wait_for(self, assignment: str, timeout_s: float = 20.0) -> str:
        """Wait for a datagram holding ``assignment`` (e.g. ``READY=1``) and return it."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            message = self.receive(left)
            if message is not None and assignment in message.splitlines():
                return message
            if self.process.poll() is not None:
                break
        raise AssertionError(
            f"no {assignment} within {timeout_s} s; heard {self.messages}; "
            f"exit={self.process.poll()}; log:\n{self.log_text()}"
        )

    def log_text(self) -> str:
        """Everything the daemon wrote to stdout and stderr so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def log_records(self) -> list[dict[str, Any]]:
        """The daemon's JSON log lines, parsed."""
        records = []
        for line in self.log_text().splitlines():
            if line.startswith("{"):
                records.append(json.loads(line))
        return records

    def signal(self, signum: signal.Signals) -> None:
        """Send ``signum`` to the daemon."""
        self.process.send_signal(signum)


def governor_metrics(config_text: str) -> str:
    """The daemon's own /metrics page, at the listen_port of ``config_text``."""
    port = next(
        line.split("=")[1].strip()
        for line in config_text.splitlines()
        if line.startswith("listen_port")
    )
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


@contextmanager
def running_daemon(
    config: Path,
    *,
    watchdog_usec: int | None = None,
    env: dict[str, str] | None = None,
    wrapper: Sequence[str] = (),
) -> Iterator[RunningDaemon]:
    """Start ``vllm-governor run --config CONFIG`` as systemd would; kill it on the way out.

    ``wrapper`` is a command the daemon runs under (e.g. ``setpriv`` with fewer privileges).
    """
    address = f"@vllm-governor-test-{uuid.uuid4().hex}"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind("\0" + address[1:])
    environment = {**os.environ, "NOTIFY_SOCKET": address, **(env or {})}
    if watchdog_usec is not None:
        environment["WATCHDOG_USEC"] = str(watchdog_usec)
    log_path = config.parent / "daemon.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [*wrapper, sys.executable, "-m", "daemon.app.cli", "run", "--config", str(config)],
            env=environment,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            # A session of its own, as a systemd service has: the kernel shares the CPU between
            # sessions first (autogroups), so a test's load threads do not starve the daemon.
            start_new_session=True,
        )
    daemon = RunningDaemon(process, notify, log_path)
    try:
        yield daemon
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        notify.close()


def without_permission_bypass() -> list[str]:
    """A wrapper under which file permissions hold for the daemon even when the tests run as root.

    Root reads a ``chmod 000`` directory through ``CAP_DAC_OVERRIDE`` and
    ``CAP_DAC_READ_SEARCH``; with both out of the bounding set, root's ``execve`` grants neither,
    and the daemon meets ``EACCES`` as the ``vllm-governor`` user would. Other users need no
    wrapper.
    """
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to drop root's permission bypass")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
