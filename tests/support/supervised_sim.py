"""A ``sim serve`` process under a real service manager: supervisord, on a Unix socket in a tmp dir.

systemd cannot run as PID 1 here; supervisord is a real service manager many hosts use, and
``supervisorctl -c CONF restart sim`` restarts the program as ``systemctl restart UNIT`` would,
so the actuator runs unchanged with that restart command. ``startsecs=3`` with no retries
makes a program that exits within 3 s a spawn error (``supervisorctl`` exits non-zero), like a
unit that fails to start.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from tests.support.services import free_port, require_command

ROOT = Path(__file__).resolve().parents[2]
PROFILE = "llama-3.1-8b-h100-tp1"
MODEL = "sim/test-model"
PROGRAM = "sim"
# A load that saturates a small max-num-seqs at once: 40 requests/s of ~150 output tokens need
# ~6,000 tokens/s, several times what 4-16 sequences at ~6 ms per step produce.
SATURATING_WORKLOAD = """\
name: saturating
duration_s: 600
seed: 3
arrivals: {rate_rps: 40}
prompt_tokens: {median: 200, p90: 400, max: 1000}
output_tokens: {median: 150, p90: 300, max: 600}
"""


@dataclass
class SupervisedSim:
    """supervisord running one ``sim serve`` program named ``sim``."""

    directory: Path
    conf: Path
    process: subprocess.Popen[bytes]
    port: int
    vllm_yaml: Path
    env_file: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restart_command(self) -> list[str]:
        return ["supervisorctl", "-c", str(self.conf), "restart", PROGRAM]

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["supervisorctl", "-c", str(self.conf), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )

    def supervisord_log(self) -> str:
        return (self.directory / "supervisord.log").read_text(errors="replace")

    def sim_log(self) -> str:
        path = self.directory / "sim.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def spawns(self) -> int:
        """How many times supervisord started the program."""
        return len(re.findall(rf"spawned: '{PROGRAM}'", self.supervisord_log()))

    def get(self, path: str) -> tuple[int, str] | None:
        """Status and body of a GET, or None while the port refuses connections."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except (urllib.error.URLError, ConnectionError):
            return None

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if (answer := self.get("/health")) is not None and answer[0] == 200:
                return
            time.sleep(0.1)
        raise AssertionError(
            f"the sim never became ready\n{self.supervisord_log()}\n{self.sim_log()}"
        )


def _conf(directory: Path, port: int, vllm_yaml: Path, load: Path | None) -> str:
    command = [
        sys.executable, "-m", "daemon.app.cli", "sim", "serve", "--config", str(vllm_yaml),
        "--profile", PROFILE, "--port", str(port), "--loading-s", "0.1",
    ]  # fmt: skip
    if load is not None:
        command += ["--load", str(load)]
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
[program:{PROGRAM}]
command={" ".join(command)}
directory={ROOT}
startsecs=3
startretries=0
autorestart=false
stopsignal=TERM
stopwaitsecs=15
redirect_stderr=true
stdout_logfile={directory}/sim.log
stdout_logfile_maxbytes=0
"""


@contextmanager
def supervised_sim(
    directory: Path, vllm_config: str, *, load: str | None = None
) -> Iterator[SupervisedSim]:
    """Start supervisord with the sim as its program; stop both on the way out."""
    require_command("supervisord")
    require_command("supervisorctl")
    port = free_port()
    vllm_yaml = directory / "vllm.yaml"
    vllm_yaml.write_text(f"served-model-name: {MODEL}\n{vllm_config}", encoding="utf-8")
    vllm_yaml.chmod(0o640)
    env_file = directory / "vllm.env"
    env_file.write_text("# the unit's environment\nVLLM_LOGGING_LEVEL=INFO\n", encoding="utf-8")
    workload = None
    if load is not None:
        workload = directory / "workload.yaml"
        workload.write_text(load, encoding="utf-8")
    conf = directory / "supervisord.conf"
    conf.write_text(_conf(directory, port, vllm_yaml, workload), encoding="utf-8")
    process = subprocess.Popen(
        ["supervisord", "-c", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    sim = SupervisedSim(directory, conf, process, port, vllm_yaml, env_file)
    try:
        sim.wait_ready()
        yield sim
    finally:
        _stop(sim)


def _stop(sim: SupervisedSim) -> None:
    """supervisord stops its program on SIGTERM; kill the whole group if it lingers."""
    if sim.process.poll() is None:
        sim.process.send_signal(signal.SIGTERM)
        try:
            sim.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(sim.process.pid, signal.SIGKILL)
            sim.process.wait()
