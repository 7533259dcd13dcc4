"""``vllm-governor demo``: the daemon's lifecycle on the embedded default, narrated.

It runs ``vllm-governor run`` as a real child process the way systemd would (a datagram socket
as ``NOTIFY_SOCKET``, a watchdog armed), then shows the readiness handshake, the status over the
control socket, the governor's own metrics, a configuration reload and a graceful stop. Nothing
leaves the machine: everything listens on loopback or in a temporary directory.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from daemon.app.control_client import call_daemon
from daemon.app.defaults import EXIT_FAILURE, EXIT_OK
from daemon.core.errors import ControlError

WATCHDOG_USEC = 2_000_000


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` subcommand."""
    parser = subparsers.add_parser(
        "demo",
        help="run the governor on the embedded default and narrate what it does",
        description="Start the daemon as systemd would, on loopback and a temporary directory, "
        "and show its readiness, status, metrics, a reload and a graceful stop.",
    )
    parser.add_argument("--duration", type=float, default=8.0, help="seconds to keep it running")
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Run the narrated demo; exit 0 when the daemon behaved as described."""
    with tempfile.TemporaryDirectory(prefix="vllm-governor-demo-") as scratch:
        return _demo(Path(scratch), args.duration)


def _demo(scratch: Path, duration_s: float) -> int:
    config = scratch / "config.toml"
    port = _free_port()
    _write_config(config, scratch, port)
    say(f"config written to {config} (metrics on 127.0.0.1:{port}, state in {scratch})")
    with _notify_socket(scratch / "notify.sock") as notify:
        env = {
            **os.environ,
            "NOTIFY_SOCKET": str(scratch / "notify.sock"),
            "WATCHDOG_USEC": str(WATCHDOG_USEC),
        }
        command = [sys.executable, "-m", "daemon.app.cli", "run", "--config", str(config)]
        say("starting: vllm-governor run --config " + str(config))
        daemon = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)  # noqa: S603
        try:
            if not _wait_for(notify, "READY=1", timeout_s=30):
                say("the daemon did not report READY=1 within 30 s")
                return EXIT_FAILURE
            _show_status(scratch / "control.sock")
            _show_metrics(port)
            say("sending SIGHUP: the daemon reloads its configuration without stopping")
            daemon.send_signal(signal.SIGHUP)
            _wait_for(notify, "READY=1", timeout_s=10)
            _watch(notify, duration_s)
            say("sending SIGTERM: graceful stop")
            started = time.monotonic()
            daemon.send_signal(signal.SIGTERM)
            code = daemon.wait(timeout=30)
            _drain(notify)
            say(f"daemon exited with status {code} after {time.monotonic() - started:.2f} s")
            return EXIT_OK if code == 0 else EXIT_FAILURE
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()


def say(line: str) -> None:
    """Narrate one step."""
    print(f"[demo] {line}", flush=True)


def _write_config(path: Path, scratch: Path, port: int) -> None:
    path.write_text(
        "[governor]\n"
        f'state_dir = "{scratch / "state"}"\n'
        "policy_dirs = []\n"
        "[control]\n"
        f'socket_path = "{scratch / "control.sock"}"\n'
        "[metrics]\n"
        'listen_host = "127.0.0.1"\n'
        f"listen_port = {port}\n"
        "[logging]\n"
        'format = "text"\n',
        encoding="utf-8",
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def _notify_socket(path: Path) -> Iterator[socket.socket]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        yield sock


def _messages(sock: socket.socket, timeout_s: float) -> Iterator[str]:
    """Print and yield each notification that arrives within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            message = sock.recv(4096).decode()
        except TimeoutError:
            return
        say("systemd hears: " + message.replace("\n", " | "))
        yield message


def _wait_for(sock: socket.socket, wanted: str, timeout_s: float) -> bool:
    return any(wanted in message.splitlines() for message in _messages(sock, timeout_s))


def _watch(sock: socket.socket, duration_s: float) -> None:
    say(f"watching for {duration_s:.0f} s (watchdog pings every {WATCHDOG_USEC / 2e6:.0f} s)")
    for _ in _messages(sock, duration_s):
        pass


def _drain(sock: socket.socket) -> None:
    for _ in _messages(sock, 0.2):
        pass


def _show_status(socket_path: Path) -> None:
    try:
        status = call_daemon(socket_path, "status")
    except ControlError as exc:
        say(f"status over the control socket failed: {exc}")
        return
    say(f"status over {socket_path}: state={status['state']} tasks={status['tasks']}")


def _show_metrics(port: int) -> None:
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        body = response.read().decode()
    wanted = ("vllm_governor_build_info", "vllm_governor_ready", "vllm_governor_uptime_seconds")
    for line in body.splitlines():
        if line.startswith(wanted):
            say(f"metrics: {line}")
