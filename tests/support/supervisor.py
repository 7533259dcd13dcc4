"""One program under a real service manager: supervisord, on a Unix socket in a tmp dir.

systemd cannot run as PID 1 here; supervisord is a real service manager many hosts use, and
``supervisorctl -c CONF restart NAME`` restarts the program as ``systemctl restart UNIT``
would, so the actuator runs unchanged with that restart command. A program that exits within
``startsecs`` is a spawn error (``supervisorctl`` exits non-zero), like a unit that fails to
start; ``stopwaitsecs`` is the hard stop (systemd's ``TimeoutStopSec``): SIGKILL to the whole
process group once it has passed, whatever clients still wait for.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from tests.support.services import require_command

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Program:
    """How supervisord runs the program.

    Attributes:
        name: The program's name for supervisorctl.
        command: Its arguments (supervisord splits on spaces: none may hold one).
        port: Where it serves HTTP.
        startsecs: Seconds it must stay up to count as started.
        stopwaitsecs: Seconds from SIGTERM to SIGKILL.
        environment: Extra environment variables.
    """

    name: str
    command: Sequence[str]
    port: int
    startsecs: int = 3
    stopwaitsecs: int = 15
    environment: Mapping[str, str] | None = None


@dataclass
class Supervised:
    """supervisord running one program."""

    directory: Path
    conf: Path
    process: subprocess.Popen[bytes]
    program: Program

    @property
    def port(self) -> int:
        return self.program.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def program_log(self) -> Path:
        """Where the program's output goes (stdout and stderr)."""
        return self.directory / f"{self.program.name}.log"

    def restart_command(self) -> list[str]:
        return ["supervisorctl", "-c", str(self.conf), "restart", self.program.name]

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["supervisorctl", "-c", str(self.conf), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )

    def supervisord_log(self) -> str:
        return (self.directory / "supervisord.log").read_text(errors="replace")

    def output(self) -> str:
        path = self.program_log
        return path.read_text(errors="replace") if path.exists() else ""

    def spawns(self) -> int:
        """How many times supervisord started the program."""
        return len(re.findall(rf"spawned: '{self.program.name}'", self.supervisord_log()))

    def get(self, path: str, timeout_s: float = 5.0) -> tuple[int, str] | None:
        """Status and body of a GET, or None while the port refuses connections."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout_s) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if (answer := self.get("/health")) is not None and answer[0] == 200:
                return
            time.sleep(0.2)
        raise AssertionError(
            f"{self.program.name} never became ready\n{self.supervisord_log()}\n"
            f"{self.output()[-5000:]}"
        )


def _conf(directory: Path, program: Program) -> str:
    environment = ",".join(f'{key}="{value}"' for key, value in (program.environment or {}).items())
    return f"""\
[unix_http_server]
file={directory}/supervisor.sock
[supervisord]
logfile={directory}/supervisord.log
pidfile={directory}/supervisord.pid
childlogdir={directory}
nodaemon=true
[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface
[supervisorctl]
serverurl=unix://{directory}/supervisor.sock
[program:{program.name}]
command={" ".join(program.command)}
directory={ROOT}
startsecs={program.startsecs}
startretries=0
autorestart=false
stopsignal=TERM
stopwaitsecs={program.stopwaitsecs}
stopasgroup=true
killasgroup=true
redirect_stderr=true
stdout_logfile={directory}/{program.name}.log
stdout_logfile_maxbytes=0
{"environment=" + environment if environment else ""}
"""


@contextmanager
def supervised(directory: Path, program: Program, *, ready_s: float = 30.0) -> Iterator[Supervised]:
    """Start supervisord with ``program``, wait until it serves; stop both on the way out."""
    require_command("supervisord")
    require_command("supervisorctl")
    conf = directory / "supervisord.conf"
    conf.write_text(_conf(directory, program), encoding="utf-8")
    process = subprocess.Popen(
        ["supervisord", "-c", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    running = Supervised(directory, conf, process, program)
    try:
        running.wait_ready(ready_s)
        yield running
    finally:
        stop(running)


def stop(running: Supervised) -> None:
    """supervisord stops its program on SIGTERM; kill the whole group if it lingers."""
    if running.process.poll() is None:
        running.process.send_signal(signal.SIGTERM)
        try:
            running.process.wait(timeout=running.program.stopwaitsecs + 15)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(running.process.pid, signal.SIGKILL)
            running.process.wait()
