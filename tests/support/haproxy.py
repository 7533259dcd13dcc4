"""A real HAProxy running the shipped reference config, in front of a server the test started.

:func:`render_reference_config` takes ``examples/haproxy/haproxy.cfg`` and changes only what a
test must: the ports, the stats socket (in the test's directory, owned by whoever runs the
test), the privilege drop (chroot, user, group need root and Debian's user), logging (to
stderr, into the log file) and, if asked, the queue timeout and the health-check interval.
Every replacement must match exactly once, so the test fails if the shipped file drifts away
from what it renders.

:class:`Haproxy` runs ``haproxy -f CFG -db`` (foreground) as a subprocess and returns once the
stats socket answers; it is always killed when the ``with`` block ends, and can be stopped
and started again on the same config to play an HAProxy restart.
"""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Self

from tests.support.services import free_port, require_command

REFERENCE_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "haproxy" / "haproxy.cfg"
START_TIMEOUT_S = 15.0
BACKEND = "vllm"
SERVER = "main"


def render_reference_config(
    *,
    frontend_port: int,
    server_port: int,
    stats_socket: Path,
    maxconn: int,
    queue_timeout: str | None = None,
    check_inter: str = "500ms",
    tcp_stats_port: int | None = None,
) -> str:
    """The reference config with the test's ports, socket and cap.

    ``tcp_stats_port`` adds a second stats socket on loopback TCP, for the client's other
    transport (the shipped config has only the Unix socket, on purpose).
    """
    text = REFERENCE_CONFIG.read_text(encoding="utf-8")
    replacements = [
        (r"^\s*log /dev/log local0$", "    log stderr format raw local0"),
        (r"^\s*chroot .*$", ""),
        (r"^\s*user haproxy$", ""),
        (r"^\s*group haproxy$", ""),
        (
            r"stats socket /run/haproxy/vllm-governor\.sock user vllm-governor mode 600",
            f"stats socket {stats_socket} mode 600",
        ),
        (r"bind 127\.0\.0\.1:8080$", f"bind 127.0.0.1:{frontend_port}"),
        (
            r"server main 127\.0\.0\.1:8000 maxconn 256 check inter 2s",
            f"server main 127.0.0.1:{server_port} maxconn {maxconn} check inter {check_inter}",
        ),
    ]
    if queue_timeout is not None:
        replacements.append((r"timeout queue 1500ms$", f"timeout queue {queue_timeout}"))
    if tcp_stats_port is not None:
        replacements.append(
            (
                r"^(\s*stats socket /run/haproxy/.*)$",
                rf"\1\n    stats socket ipv4@127.0.0.1:{tcp_stats_port} level admin",
            )
        )
        replacements.insert(0, replacements.pop())  # before the Unix socket line changes
    for pattern, replacement in replacements:
        text, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
        if count != 1:
            message = f"{REFERENCE_CONFIG}: {pattern!r} matched {count} times, not once"
            raise AssertionError(message)
    return text


class Haproxy:
    """One ``haproxy -db`` process on a rendered config; a context manager."""

    def __init__(self, executable: str, directory: Path, config: str, stats_socket: Path) -> None:
        self.executable = executable
        self.directory = directory
        self.stats_socket = stats_socket
        self.config_path = directory / "haproxy.cfg"
        self.config_path.write_text(config, encoding="utf-8")
        self.log_path = directory / "haproxy.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start and wait until the stats socket answers."""
        if self._process is not None:
            return
        command = [self.executable, "-f", str(self.config_path), "-db"]
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._process = None
                message = f"haproxy exited at start:\n{self.log_path.read_text()}"
                raise RuntimeError(message)
            if self._answers():
                return
            time.sleep(0.05)
        self.stop()
        message = f"haproxy's stats socket did not answer in {START_TIMEOUT_S} s"
        raise RuntimeError(f"{message}:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        """Kill it (SIGKILL: a crash leaves its socket file behind, as a real one would)."""
        process, self._process = self._process, None
        if process is None:
            return
        process.kill()
        process.wait()

    def command(self, line: str) -> str:
        """One runtime API command, answered synchronously (for assertions)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(5)
            client.connect(str(self.stats_socket))
            client.sendall(line.encode() + b"\n")
            chunks = []
            while chunk := client.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def stat(self, proxy: str, name: str) -> dict[str, str]:
        """The ``show stat`` fields of one row, straight from HAProxy."""
        lines = self.command("show stat -1 6 -1").splitlines()
        header = lines[0].removeprefix("# ").split(",")
        for line in lines[1:]:
            fields = dict(zip(header, line.split(","), strict=False))
            if fields.get("pxname") == proxy and fields.get("svname") == name:
                return fields
        message = f"no row {proxy}/{name} in show stat"
        raise AssertionError(message)

    def _answers(self) -> bool:
        try:
            return self.command("show info").startswith("Name: HAProxy")
        except OSError:
            return False

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextmanager
def gate_in_front(directory: Path, server_port: int) -> Iterator[tuple[Haproxy, int]]:
    """HAProxy on the reference config in front of ``server_port``; and its frontend port.

    A queue timeout long enough for a slow machine, and health checks every 200 ms, so the
    gate sees a restarted server up within a second.
    """
    socket_path = directory / "haproxy.sock"
    port = free_port()
    config = render_reference_config(
        frontend_port=port,
        server_port=server_port,
        stats_socket=socket_path,
        maxconn=8,
        queue_timeout="30s",
        check_inter="200ms",
    )
    with Haproxy(require_command("haproxy"), directory, config, socket_path) as haproxy:
        yield haproxy, port


class StatusWatch:
    """Every status HAProxy shows for the server, polled in a thread while a change runs."""

    def __init__(self, haproxy: Haproxy) -> None:
        self._haproxy = haproxy
        self.seen: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(0.05):
            status = self._haproxy.stat(BACKEND, SERVER)["status"]
            if not self.seen or self.seen[-1] != status:
                self.seen.append(status)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
