"""``vllm-governor sim serve`` as a real process on a free loopback port, for contract tests."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.services import free_port

PROFILE = "llama-3.1-8b-h100-tp1"
MODEL = "sim/test-model"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class SimProcess:
    """A started ``sim serve``."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    def healthy(self) -> bool:
        """Whether /health answers 200 (the port refuses while it loads)."""
        try:
            with _OPENER.open(f"http://127.0.0.1:{self.port}/health", timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False


@contextmanager
def sim_serve(
    directory: Path,
    config: str,
    *,
    loading_s: float = 0.3,
    load: str | None = None,
    port: int | None = None,
) -> Iterator[SimProcess]:
    """Start ``sim serve`` with ``config`` (vLLM YAML) and wait until ready; always kill it.

    ``load`` is a workload spec (YAML text) the server replays against itself from the moment
    it is ready (``--load``). ``port`` starts it where an earlier one stood (a restart).
    """
    vllm_config = directory / "vllm.yaml"
    vllm_config.write_text(f"served-model-name: {MODEL}\n{config}", encoding="utf-8")
    port = port or free_port()
    command = [
        sys.executable, "-m", "daemon.app.cli", "sim", "serve",
        "--config", str(vllm_config), "--profile", PROFILE,
        "--port", str(port), "--loading-s", str(loading_s),
    ]  # fmt: skip
    if load is not None:
        workload = directory / "workload.yaml"
        workload.write_text(load, encoding="utf-8")
        command += ["--load", str(workload)]
    log_path = directory / f"sim-{port}.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
    server = SimProcess(process, port, log_path)
    try:
        deadline = time.monotonic() + 30
        while not server.healthy():
            if process.poll() is not None or time.monotonic() > deadline:
                message = f"sim serve never became ready:\n{log_path.read_text()}"
                raise RuntimeError(message)
            time.sleep(0.05)
        yield server
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
