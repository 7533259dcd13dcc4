"""``vllm-governor whatif`` against a running daemon watching a loaded ``sim serve``.

Everything is real: the simulated vLLM serving its own load (``--load``) in real time, the
daemon as a subprocess scraping it, and the command asking the daemon over the control socket,
which characterises the window from its store and simulates the candidates in a worker
process. The workload is known, so the characterisation can be held to it; the grid is the
envelopes' (max_num_seqs 16-128, max_num_batched_tokens 1024-4096: 4 x 3 candidates).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import RunningDaemon, running_daemon, write_config
from tests.support.sim_serve import SimProcess, sim_serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

RATE_RPS = 8.0
LOAD = f"""\
name: whatif-e2e
duration_s: 600
seed: 5
arrivals: {{rate_rps: {RATE_RPS}}}
prompt_tokens: {{median: 600, p90: 1500, max: 8000}}
output_tokens: {{median: 40, p90: 100, max: 400}}
"""


def _config(directory: Path, sim: SimProcess) -> Path:
    vllm = f"""
[[vllm]]
name = "main"
url = "http://127.0.0.1:{sim.port}"
scrape_interval_s = 0.5
unit = "sim.service"
config_path = "{directory / "vllm.yaml"}"
[vllm.knobs.max_num_seqs]
min = 16
max = 128
max_step = 64
[vllm.knobs.max_num_batched_tokens]
min = 1024
max = 4096
max_step = 2048
"""
    config = write_config(directory, extra=vllm)
    config.write_text(
        config.read_text() + "[sources.nvml]\nenabled = false\n[sources.host]\nenabled = false\n"
    )
    return config


def _whatif(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "daemon.app.cli", "whatif", "main", "--config", str(config)]
    return subprocess.run(
        [*command, "--window", "2m", "--simulated", "60s", *extra],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )


def _answer_once_enough_finished(config: Path, daemon: RunningDaemon) -> dict[str, Any]:
    """The first answer; until 20 requests have finished the daemon says it needs more."""
    deadline = time.monotonic() + 60
    while True:
        done = _whatif(config, "--json")
        if done.returncode == 0:
            answer: dict[str, Any] = json.loads(done.stdout)
            return answer
        waiting = "requests finished" in done.stderr or "scrape(s)" in done.stderr
        if not waiting or time.monotonic() > deadline or daemon.process.poll() is not None:
            raise AssertionError(f"whatif failed: {done.stderr}\n{daemon.log_text()[-4000:]}")
        time.sleep(1.0)  # more requests finish meanwhile: the load runs at 8 per second


def test_whatif_over_the_control_socket_ranks_the_envelopes_grid(tmp_path: Path) -> None:
    vllm_yaml = "max-num-seqs: 64\nmax-num-batched-tokens: 2048\n"
    with sim_serve(tmp_path, vllm_yaml, load=LOAD) as sim:
        config = _config(tmp_path, sim)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            answer = _answer_once_enough_finished(config, daemon)
            text = _whatif(config)

    workload = answer["workload"]
    assert workload["instance"] == "main"
    assert 0.6 * RATE_RPS <= workload["rate_rps"] <= 1.4 * RATE_RPS
    assert 400 <= workload["prompt_tokens"]["fit"]["median"] <= 900
    assert 25 <= workload["output_tokens"]["fit"]["median"] <= 60
    settings = {(c["max_num_seqs"], c["max_num_batched_tokens"]) for c in answer["candidates"]}
    assert settings == {(s, t) for s in (16, 32, 64, 128) for t in (1024, 2048, 4096)}
    assert answer["current"]["max_num_seqs"] == 64
    assert answer["current"]["max_num_batched_tokens"] == 2048
    objectives = [c["objective_goodput_rps"] for c in answer["candidates"]]
    assert objectives == sorted(objectives, reverse=True)
    assert all(c["restart_downtime_s"] > 0 for c in answer["candidates"] if not c["current"])
    check = answer["profile_check"]
    assert check["profile"] == "llama-3.1-8b-h100-tp1"
    assert check["verdict"] in ("agrees", "disagrees", "unknown")
    assert check["steps_per_s"] > 0
    assert answer["cpu_s"] > 0
    assert text.returncode == 0, text.stderr
    assert "pick: " in text.stdout
    assert "= 64x2048" in text.stdout  # the setting in force, marked in the table


def test_whatif_without_a_daemon_collects_from_the_target_then_plans(tmp_path: Path) -> None:
    vllm_yaml = "max-num-seqs: 64\nmax-num-batched-tokens: 2048\n"
    with sim_serve(tmp_path, vllm_yaml, load=LOAD) as sim:
        config = _config(tmp_path, sim)
        done = _whatif(config, "--collect", "8s", "--json")

    assert done.returncode == 0, done.stderr
    assert "no daemon running; collecting for 8 s" in done.stderr
    answer = json.loads(done.stdout)
    assert 0.5 * RATE_RPS <= answer["workload"]["rate_rps"] <= 1.5 * RATE_RPS
    assert len(answer["candidates"]) == 12
    assert answer["current"]["max_num_seqs"] == 64
