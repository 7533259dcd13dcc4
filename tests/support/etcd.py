"""A real etcd (Debian's ``etcd-server``, 3.4) on free loopback ports: one member or a cluster.

Each member is one ``etcd`` process with its own data directory, client port and peer port;
a cluster is several of them sharing one ``--initial-cluster`` list and a token of their own
(so two tests' clusters never talk to each other). A member can be stopped (SIGTERM), killed
(SIGKILL) and started again on the same ports with the same data, which is how a test loses
one member, or the majority, and brings it back. Every process is reaped when the ``with``
block ends, whatever happened inside.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

from tests.support.processes import end_process
from tests.support.services import free_port, require_command

# Generous: a loaded two-core CI machine can take a while to exec etcd and elect a leader.
START_TIMEOUT_S = 30.0


def etcd_executable() -> str:
    """The path of ``etcd``; skips without it, fails when CI=true."""
    return require_command("etcd")


class EtcdMember:
    """One ``etcd`` process of a cluster, restartable on the same ports with the same data."""

    def __init__(self, executable: str, directory: Path, name: str) -> None:
        self.executable = executable
        self.name = name
        self.directory = directory / name
        self.directory.mkdir(parents=True, exist_ok=True)
        self.client_port = free_port()
        self.peer_port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """The member's client URL, ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        """The URL the other members reach this one at."""
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def log_path(self) -> Path:
        """The member's own log, for messages when a test fails."""
        return self.directory / "etcd.log"

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._process is not None and self._process.poll() is None

    def launch(self, initial_cluster: str, token: str) -> None:
        """Start the process (it may wait for its peers before it serves anything)."""
        if self.running:
            return
        command = [
            self.executable,
            "--name", self.name,
            "--data-dir", str(self.directory / "data"),
            "--listen-client-urls", self.endpoint,
            "--advertise-client-urls", self.endpoint,
            "--listen-peer-urls", self.peer_url,
            "--initial-advertise-peer-urls", self.peer_url,
            "--initial-cluster", initial_cluster,
            "--initial-cluster-token", token,
            "--initial-cluster-state", "new",
            "--logger", "zap",
            "--log-outputs", "stderr",
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def listening(self) -> bool:
        """Whether the client port answers HTTP at all (a member without quorum does)."""
        return self._health() is not None

    def healthy(self) -> bool:
        """Whether the member says it is healthy (it has a leader and answers reads)."""
        return self._health() is True

    def _health(self) -> bool | None:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/health", timeout=2) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as error:
            # etcd answers 503 with {"health":"false"} without a leader: it listens.
            return False if error.code == 503 else None
        except (OSError, ValueError):
            return None
        return bool(body.get("health") == "true")

    def stop(self) -> None:
        """SIGTERM (then SIGKILL); the data directory stays for a later start."""
        process, self._process = self._process, None
        end_process(process, timeout_s=10)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait()

    def check_alive(self) -> None:
        """Raise with the member's log if the process exited."""
        if self._process is not None and self._process.poll() is not None:
            message = f"etcd {self.name} exited:\n{self.log_path.read_text(errors='replace')}"
            raise RuntimeError(message)


class EtcdCluster:
    """``size`` etcd members on loopback; a context manager that reaps them all."""

    def __init__(self, directory: Path, size: int = 1, executable: str | None = None) -> None:
        executable = executable or etcd_executable()
        self.token = f"governor-test-{uuid.uuid4().hex[:12]}"
        self.members = [EtcdMember(executable, directory, f"m{i}") for i in range(size)]
        self.initial_cluster = ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    @property
    def endpoints(self) -> list[str]:
        """Every member's client URL."""
        return [member.endpoint for member in self.members]

    def start(self) -> None:
        """Start every member and wait until each is healthy (a leader is elected)."""
        for member in self.members:
            member.launch(self.initial_cluster, self.token)
        self.wait_healthy(self.members)

    def stop_member(self, index: int, *, kill: bool = False) -> None:
        """Stop member ``index`` (SIGKILL with ``kill``); its ports and data stay reserved."""
        member = self.members[index]
        member.kill() if kill else member.stop()

    def start_member(self, index: int, *, wait_healthy: bool = True) -> None:
        """Start member ``index`` again and wait for its health.

        Without ``wait_healthy`` it is only launched: a member whose peers are all down serves
        nothing until a quorum is back (start them all, then :meth:`wait_healthy`).
        """
        member = self.members[index]
        member.launch(self.initial_cluster, self.token)
        if wait_healthy:
            self.wait_healthy([member])

    def wait_healthy(self, members: list[EtcdMember]) -> None:
        """Wait until every one of ``members`` is healthy."""
        self._wait(lambda: all(m.healthy() for m in members), members, "become healthy")

    def wait_unhealthy(self, members: list[EtcdMember]) -> None:
        """Wait until none of ``members`` is healthy (a lost quorum takes an election timeout)."""
        self._wait(lambda: not any(m.healthy() for m in members), members, "lose its quorum")

    def _wait(self, ready: Callable[[], bool], members: list[EtcdMember], what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for member in members:
                member.check_alive()
            if ready():
                return
            time.sleep(0.05)
        logs = "\n".join(m.log_path.read_text(errors="replace")[-3000:] for m in members)
        message = f"etcd did not {what} within {START_TIMEOUT_S} s:\n{logs}"
        raise RuntimeError(message)

    def close(self) -> None:
        """Stop every member."""
        for member in self.members:
            member.stop()

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
