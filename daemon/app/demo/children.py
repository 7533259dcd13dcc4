"""The demo's child processes: the simulated server under ``sim supervise``, and the daemon.

Both run in sessions of their own, so that a Ctrl-C in the terminal reaches the demo only,
and the demo stops them in order: the daemon first (it must not see the server go away and
act on it), then the supervisor, which stops the server; the server writes its summary line
as it exits. A child that does not stop within its deadline is killed with its whole process
group, so nothing is left running.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from daemon.app.demo.scenario import (
    GATE_BACKEND,
    GATE_QUEUE_TIMEOUT_S,
    GATE_SERVER,
    LOADING_S,
    SHUTDOWN_TIMEOUT_S,
    Paths,
)
from daemon.core.errors import GovernorError

# The server drains for up to SHUTDOWN_TIMEOUT_S on SIGTERM and then closes its HTTP side
# (up to 5 s): the supervisor waits longer than that before it kills it, the demo longer still.
_SERVER_STOP_TIMEOUT_S = SHUTDOWN_TIMEOUT_S + 10
_STOP_DEADLINE_S = _SERVER_STOP_TIMEOUT_S + 10.0
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class DemoError(GovernorError):
    """The demo could not start or run a piece; the message says which and where to look."""


@dataclass
class Child:
    """One started child process and where its output goes."""

    name: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    def alive(self) -> bool:
        """Whether it still runs."""
        return self.process.poll() is None

    def stop(self, deadline_s: float = _STOP_DEADLINE_S) -> int | None:
        """SIGTERM, wait up to ``deadline_s``, then SIGKILL its process group; its status."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=deadline_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()
        return self.process.returncode


@dataclass
class Children:
    """Every child the demo started, in start order."""

    started: list[Child] = field(default_factory=list)

    def start(self, name: str, command: list[str], log_path: Path, **env: str) -> Child:
        """Start ``command`` (no shell) with its output in ``log_path``."""
        log = log_path.open("ab")
        process = subprocess.Popen(  # noqa: S603 - an argument list built by the demo
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - no thread runs yet at start
        )
        child = Child(name, process, log)
        self.started.append(child)
        return child

    def stop_all(self) -> None:
        """Stop every child, the last started first."""
        while self.started:
            self.started.pop().stop()


def _die_with_parent() -> None:
    """Linux: SIGTERM this child if the demo dies without stopping it (e.g. SIGKILL)."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def cli(*arguments: str) -> list[str]:
    """A ``vllm-governor`` command line on this interpreter."""
    return [sys.executable, "-m", "daemon.app.cli", *arguments]


def supervised_sim_command(paths: Paths, origin: float) -> list[str]:
    """``sim supervise`` keeping ``sim serve`` alive with the demo's workload and files."""
    serve = cli(
        "sim", "serve", "--config", str(paths.vllm_yaml), "--profile", str(paths.profile),
        "--loading-s", f"{LOADING_S:g}", "--load", str(paths.workload),
        "--load-origin", f"{origin:.3f}", "--summary", str(paths.sim_summary),
        "--gate-socket", str(paths.gate_socket), "--gate-backend", GATE_BACKEND,
        "--gate-server", GATE_SERVER, "--gate-queue-timeout-s", f"{GATE_QUEUE_TIMEOUT_S:g}",
        "--gate-state", str(paths.gate_state),
    )  # fmt: skip
    return cli(
        "sim", "supervise", "--socket", str(paths.supervisor_socket),
        "--stop-timeout", f"{_SERVER_STOP_TIMEOUT_S:g}", "--env-file", str(paths.env_file),
        "--", *serve,
    )  # fmt: skip


def daemon_command(paths: Paths) -> list[str]:
    """``vllm-governor run`` on the demo's config."""
    return cli("run", "--config", str(paths.config))


@contextlib.contextmanager
def notify_socket(path: Path) -> Iterator[socket.socket]:
    """A datagram socket standing where systemd's ``NOTIFY_SOCKET`` would."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        yield sock


def wait_ready_notification(sock: socket.socket, daemon: Child, timeout_s: float) -> None:
    """Wait for the daemon's ``READY=1``.

    Raises:
        DemoError: It exited, or stayed silent for ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        if not daemon.alive():
            message = f"the governor exited with status {daemon.process.returncode} at start"
            raise DemoError(message)
        sock.settimeout(min(left, 0.5))
        try:
            message = sock.recv(4096).decode(errors="replace")
        except TimeoutError:
            continue
        if "READY=1" in message.splitlines():
            return
    message = f"the governor did not report READY=1 within {timeout_s:.0f} s"
    raise DemoError(message)


def wait_http_ready(url: str, child: Child, timeout_s: float) -> None:
    """Wait for ``url`` to answer 200.

    Raises:
        DemoError: The child exited, or ``url`` did not answer within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not child.alive():
            message = f"{child.name} exited with status {child.process.returncode} at start"
            raise DemoError(message)
        with (
            contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError),
            urllib.request.urlopen(url, timeout=2) as answer,  # noqa: S310 - loopback only
        ):
            if answer.status == 200:
                return
        time.sleep(0.2)
    message = f"{child.name} did not answer {url} within {timeout_s:.0f} s"
    raise DemoError(message)
