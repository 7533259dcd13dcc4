"""``vllm-governor apply --dry-run --set`` as an operator runs it: what it says, how it exits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.daemon import write_config
from tests.support.fixture_exporter import FixtureExporter, Script


def _config(directory: Path, exporter: FixtureExporter, vllm_yaml: Path) -> Path:
    extra = (
        f'[[vllm]]\nname = "main"\nurl = "{exporter.base_url}"\nconfig_path = "{vllm_yaml}"\n'
        'unit = "vllm@main.service"\n'
        "[vllm.knobs.max_num_seqs]\nmin = 32\nmax = 128\nmax_step = 32\n"
    )
    return write_config(directory, extra=extra)


def _apply(config: Path, *changes: str) -> subprocess.CompletedProcess[str]:
    sets = [argument for change in changes for argument in ("--set", change)]
    return subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "apply", "--dry-run", "--instance", "main",
         *sets, "--config", str(config)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip


def test_a_refused_change_lists_every_failed_check_and_exits_one(short_tmp: Path) -> None:
    vllm_yaml = short_tmp / "main.yaml"
    vllm_yaml.write_text("max-num-seqs: 64\nmax-num-batched-tokens: 256\n")
    # The exporter answers /version but not /v1/models: the server is not serving either.
    with FixtureExporter(Script()) as exporter:
        result = _apply(_config(short_tmp, exporter, vllm_yaml), "max_num_seqs=500")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:5] == [
        "main: refused by 4 checks; nothing would be changed",
        "  registry: max_num_batched_tokens (256) must be >= max_num_seqs (500): vLLM would not "
        "start",
        "  envelope: max_num_seqs=500 is outside its envelope [32, 128]",
        "  envelope: max_num_seqs: a step of 436 exceeds max_step 32",
        "  not_ready: main is not serving (no_models): its config is not known good",
    ]
    assert "refused: refused" not in result.stdout
    assert vllm_yaml.read_text() == "max-num-seqs: 64\nmax-num-batched-tokens: 256\n"


def test_a_change_that_would_go_ahead_says_so_once_and_exits_zero(short_tmp: Path) -> None:
    vllm_yaml = short_tmp / "main.yaml"
    vllm_yaml.write_text("max-num-seqs: 64\n")
    page = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0.0\n"
    with FixtureExporter(Script(metrics=page, models_status=200)) as exporter:
        result = _apply(_config(short_tmp, exporter, vllm_yaml), "max_num_seqs=96")
    assert result.returncode == 0, result.stdout + result.stderr
    first = result.stdout.splitlines()[0]
    assert first == (
        f"main: dry run: would write {vllm_yaml} and run ['systemctl', 'restart', "
        "'vllm@main.service']"
    )


def test_an_unreadable_config_file_is_named(short_tmp: Path) -> None:
    missing = short_tmp / "missing.yaml"
    with FixtureExporter(Script()) as exporter:
        result = _apply(_config(short_tmp, exporter, missing), "max_num_seqs=96")
    assert result.returncode == 1
    assert f"cannot read {missing}, a vLLM config file of main" in result.stderr
    assert result.stdout.splitlines() == [
        "main: refused by 1 check; nothing would be changed",
        f"  config: {missing} does not exist: it must be the unit's --config",
    ]
