"""A real Mosquitto broker on a free loopback port, for contract tests and the ingest bench.

It can be stopped and started again on the same port (a broker restart), and it is always
killed when the ``with`` block ends, whatever happened inside.
"""

from __future__ import annotations

import getpass
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from tests.support.certificates import ServerCertificates
from tests.support.processes import end_process
from tests.support.services import free_port

# Generous: a loaded two-core CI machine can take a while to exec a process.
START_TIMEOUT_S = 20.0


class Mosquitto:
    """One ``mosquitto`` process, restartable on the same port; a context manager."""

    def __init__(
        self,
        executable: str,
        directory: Path,
        *,
        persistence: bool = False,
        port: int = 0,
        extra_config: Sequence[str] = (),
        tls: ServerCertificates | None = None,
    ) -> None:
        self.executable = executable
        self.extra_config = tuple(extra_config)
        self.tls = tls
        self.directory = directory
        self.persistence = persistence
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        """The broker's log, for messages when a test fails."""
        return self.directory / "mosquitto.log"

    def _write_config(self) -> Path:
        lines = [
            f"listener {self.port} {self.host}",
            "allow_anonymous true",
            f"persistence {'true' if self.persistence else 'false'}",
            f"persistence_location {self.directory}/",
            # Run as ourselves: started as root, mosquitto would switch to its own user, which
            # cannot write in a test's temporary directory.
            f"user {getpass.getuser()}",
            "log_dest stderr",
            "log_type error",
            "log_type warning",
            "log_type notice",
            *self.extra_config,
        ]
        if self.tls is not None:
            lines += [
                f"cafile {self.tls.ca}",
                f"certfile {self.tls.cert}",
                f"keyfile {self.tls.key}",
            ]
        path = self.directory / "mosquitto.conf"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self) -> None:
        """Start the broker and wait until it accepts connections."""
        if self._process is not None:
            return
        config = self._write_config()
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [self.executable, "-c", str(config)], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._process = None
                message = f"mosquitto exited at start:\n{self.log_path.read_text()}"
                raise RuntimeError(message)
            if _accepts(self.host, self.port):
                return
            time.sleep(0.02)
        self.stop()
        message = f"mosquitto did not listen within {START_TIMEOUT_S} s"
        raise RuntimeError(message)

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL); connections drop, new ones are refused."""
        process, self._process = self._process, None
        end_process(process, timeout_s=10)

    def restart(self) -> None:
        """Stop and start again on the same port."""
        self.stop()
        self.start()

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


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
