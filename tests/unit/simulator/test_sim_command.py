from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.app.cli import main

ROOT = Path(__file__).resolve().parents[3]


def _files(tmp_path: Path, config: str) -> tuple[Path, Path]:
    vllm_config = tmp_path / "vllm.yaml"
    vllm_config.write_text(config)
    trace = tmp_path / "t.csv"
    rows = "".join(f"{i * 0.2:.1f},300,40\n" for i in range(50))
    trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + rows)
    return vllm_config, trace


def test_sim_run_replays_a_trace_and_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vllm_config, trace = _files(tmp_path, "model: m\nmax-num-seqs: 64\n")
    out = tmp_path / "report.json"
    code = main(
        [
            "sim",
            "run",
            "--config",
            str(vllm_config),
            "--profile",
            "llama-3.1-8b-h100-tp1",
            "--trace",
            str(trace),
            "--json",
            str(out),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert report["requests"] == {"total": 50, "completed": 50, "aborted": 0, "rejected": 0}
    assert report["settings"]["max_num_seqs"] == 64
    printed = capsys.readouterr().out
    assert "50 total, 50 completed" in printed
    assert str(out) in printed


def test_sim_run_takes_a_workload_spec_and_a_seed(tmp_path: Path) -> None:
    spec = tmp_path / "w.yaml"
    spec.write_text(
        "name: tiny\nduration_s: 20\narrivals: {rate_rps: 2}\n"
        "prompt_tokens: {median: 500, p90: 900, max: 4000}\n"
        "output_tokens: {median: 50, p90: 100, max: 200}\n"
    )
    vllm_config, _ = _files(tmp_path, "max_num_seqs: 32\n")
    reports: list[str] = []
    for seed in ("5", "5", "6"):
        out = tmp_path / f"r{len(reports)}.json"
        args = ["sim", "run", "--config", str(vllm_config), "--profile", "llama-3.3-70b-h100-tp4"]
        args += ["--workload", str(spec), "--seed", seed, "--json", str(out)]
        assert main(args) == 0
        reports.append(out.read_text())
    assert reports[0] == reports[1] != reports[2]


def test_sim_run_reports_broken_inputs_with_their_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vllm_config, trace = _files(tmp_path, "max-num-seqs: 64\nmax-num-partial-prefills: 4\n")
    code = main(
        [
            "sim",
            "run",
            "--config",
            str(vllm_config),
            "--profile",
            "llama-3.1-8b-h100-tp1",
            "--trace",
            str(trace),
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    assert code == 78
    err = capsys.readouterr().err
    assert f"{vllm_config}:2:1: max-num-partial-prefills: unrecognized arguments" in err
    assert not (tmp_path / "r.json").exists()
