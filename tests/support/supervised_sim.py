"""A ``sim serve`` process under a real service manager (:mod:`tests.support.supervisor`).

``startsecs=3`` with no retries makes a sim that exits within 3 s (it refuses its config) a
spawn error: ``supervisorctl restart`` exits non-zero, like a unit that fails to start.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from daemon.api import Envelope, VllmInstance
from tests.support.services import free_port
from tests.support.supervisor import Program, Supervised, supervised

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
class SupervisedSim(Supervised):
    """supervisord running one ``sim serve`` program named ``sim``."""

    vllm_yaml: Path
    env_file: Path

    def sim_log(self) -> str:
        return self.output()

    def instance(self, name: str = "a1", *, ready_timeout_s: float = 20.0) -> VllmInstance:
        """This sim as a governed instance, restarted through the service manager.

        ``max-num-seqs`` may move anywhere at once (no step limit, no dwell, 20 changes an
        hour): the tests that use it are about who may restart, not how far.
        """
        return VllmInstance(
            name=name,
            url=self.url,
            scrape_interval_s=0.5,
            config_path=self.vllm_yaml,
            env_file=self.env_file,
            restart_command=self.restart_command(),
            restart_timeout_s=30.0,
            ready_timeout_s=ready_timeout_s,
            verify_window_s=1.5,
            knobs={
                "max_num_seqs": Envelope(
                    min=1, max=4096, max_step=4096, min_dwell_s=0, hourly_budget=20
                )
            },
        )


def _program(port: int, vllm_yaml: Path, load: Path | None) -> Program:
    command = [
        sys.executable, "-m", "daemon.app.cli", "sim", "serve", "--config", str(vllm_yaml),
        "--profile", PROFILE, "--port", str(port), "--loading-s", "0.1",
    ]  # fmt: skip
    if load is not None:
        command += ["--load", str(load)]
    return Program(PROGRAM, command, port, startsecs=3, stopwaitsecs=15)


@contextmanager
def supervised_sim(
    directory: Path, vllm_config: str, *, load: str | None = None
) -> Iterator[SupervisedSim]:
    """Start supervisord with the sim as its program; stop both on the way out."""
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
    with supervised(directory, _program(port, vllm_yaml, workload)) as running:
        yield SupervisedSim(
            running.directory, running.conf, running.process, running.program, vllm_yaml, env_file
        )
