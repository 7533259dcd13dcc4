"""``vllm-governor simulate`` end to end, as a user runs it: a process, a tiny workload."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = """\
name: tiny-e2e
duration_s: 120
seed: 3
arrivals: {rate_rps: 12.0, cv: 1.1}
bursts:
  - {start_s: 60, duration_s: 30, multiplier: 3.0}
phases:
  - {name: calm, start_s: 0, duration_s: 60}
  - {name: burst, start_s: 60, duration_s: 60}
prompt_tokens: {median: 1020, p90: 2734, min: 1, max: 8192}
output_tokens: {median: 129, p90: 424, min: 1, max: 1000}
"""
KEYS = {
    "slo_attainment",
    "goodput_rps",
    "goodput_tok_s",
    "throughput_tok_s",
    "ttft_p95_s",
    "tpot_p95_s",
    "preemptions",
    "restarts",
    "actions",
    "downtime_s",
    "time_to_react_s",
    "time_to_recover_s",
    "reversals",
}


def _simulate(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(SPEC)
    command = [sys.executable, "-m", "daemon.app.cli", "simulate", "--workload", str(spec)]
    return subprocess.run(
        [*command, *extra], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


def test_simulate_prints_the_table_and_writes_json_and_a_plot(tmp_path: Path) -> None:
    out, png = tmp_path / "report.json", tmp_path / "plot.png"
    done = _simulate(
        tmp_path,
        "--baselines",
        "static-default,naive-script,aimd,governor",
        "--json",
        str(out),
        "--plot",
        str(png),
        "--approval-delay",
        "10",
    )
    assert done.returncode == 0, done.stderr
    assert "governor" in done.stdout
    assert "x static" in done.stdout
    assert "seed 1" in done.stderr  # progress
    report = json.loads(out.read_text())
    assert set(report) >= {"controllers", "profile", "workload", "seeds"}
    assert report["profile"] == "llama-3.1-8b-h100-tp1"
    assert report["workload"] == "tiny-e2e"
    assert report["seeds"] == [1]
    assert set(report["controllers"]) == {"static-default", "naive-script", "aimd", "governor"}
    for entry in report["controllers"].values():
        assert set(entry) >= KEYS
        assert set(entry["phases"]) == {"calm", "burst"}
        assert len(entry["per_seed"]) == 1
    assert report["controllers"]["naive-script"]["restarts"] == 1
    assert report["controllers"]["static-default"]["actions"] == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unknown_controller_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    done = _simulate(tmp_path, "--baselines", "static-default,magic")
    assert done.returncode == 78
    assert "unknown controller(s) magic" in done.stderr
    assert "naive-script" in done.stderr


def test_a_run_can_start_from_the_deployments_settings_and_a_bad_start_is_refused(
    tmp_path: Path,
) -> None:
    out = tmp_path / "report.json"
    done = _simulate(
        tmp_path, "--baselines", "static-default,aimd", "--start", "16x4096", "--json", str(out)
    )
    assert done.returncode == 0, done.stderr
    controllers = json.loads(out.read_text())["controllers"]
    for name in ("static-default", "aimd"):
        assert controllers[name]["settings"] == {"max_num_seqs": 16, "max_num_batched_tokens": 4096}
    for bad in ("16", "16x", "0x4096", "ax4096", "16x-1"):
        refused = _simulate(tmp_path, "--baselines", "static-default", "--start", bad)
        assert refused.returncode == 2, bad  # argparse's usage error, before anything runs
        assert "expected SEQSxTOKENS" in refused.stderr, refused.stderr
