"""The governor's knowledge of vLLM's flags, against the real vLLM 0.32 of the test tier."""

from __future__ import annotations

import subprocess

import pytest

from actuators.vllm.registry import registry_for
from actuators.vllm.vllm_args import vllm_objection
from daemon.api import SystemClock
from tests.support.real_vllm import vllm_cpu_home
from tests.support.vllm_help import options_of, registry_mismatches

pytestmark = [pytest.mark.real_vllm, pytest.mark.slow, pytest.mark.timeout(300)]


def test_the_registry_of_the_running_version_matches_its_own_help() -> None:
    home = vllm_cpu_home()
    version = subprocess.run(
        [str(home / "venv/bin/python"), "-c", "import vllm; print(vllm.__version__)"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.strip()  # fmt: skip
    shown = subprocess.run(
        [str(home / "venv/bin/vllm"), "serve", "--help=all"],
        capture_output=True, text=True, check=True, timeout=120, env={"COLUMNS": "80"},
    ).stdout  # fmt: skip
    registry = registry_for(version)
    assert registry.name == "0.32"
    assert registry_mismatches(registry, shown) == []
    assert "disable-log-stats" in options_of(shown), "the flag the governor must never set"


@pytest.mark.asyncio
async def test_preflight_asks_the_real_parser_through_vllms_own_interpreter() -> None:
    python = vllm_cpu_home() / "venv/bin/python"
    clock = SystemClock()
    good = "max-num-seqs: 8\nmax-num-batched-tokens: 2048\nuvicorn-log-level: warning\n"
    assert await vllm_objection(good, clock, python) == ""
    removed = await vllm_objection("max-num-seqs: 8\nmax-num-partial-prefills: 2\n", clock, python)
    assert "unrecognized arguments: --max-num-partial-prefills" in removed
    typo = await vllm_objection("max-num-seqs: eight\n", clock, python)
    assert "argument --max-num-seqs: invalid int value: 'eight'" in typo
    level = await vllm_objection("uvicorn-log-level: loud\n", clock, python)
    assert "argument --uvicorn-log-level: invalid choice: 'loud'" in level
