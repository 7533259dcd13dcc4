"""Backtest a Prometheus range: a real Prometheus scrapes a fixture vLLM, the backtest imports
the range through the catalogue's queries, saves it as a recording, and replays it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.app.backtest.recording import read_recording
from tests.support.fixture_exporter import FixtureExporter, Script
from tests.support.prometheus import Prometheus
from tests.support.services import require_command

pytestmark = [pytest.mark.service("prometheus")]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"
POLICY = """\
name: busy
description: More than 10 requests run with the KV cache over 80%.
targets: [main]
when: kv_usage > 0.8 && running > 10.0
for: 1s
action:
  set: {max_num_seqs: "current * 0.5"}
"""


@pytest.fixture
def exporter() -> Iterator[FixtureExporter]:
    """A vLLM page with 12 requests running and 81% of the KV cache in use."""
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    with FixtureExporter(Script(metrics=page)) as fixture:
        yield fixture


def test_a_prometheus_range_becomes_a_recording_and_a_timeline(
    exporter: FixtureExporter, tmp_path: Path
) -> None:
    executable = require_command("prometheus")
    target = f"127.0.0.1:{exporter.port}"
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "busy.yaml").write_text(POLICY)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[[vllm]]\nname = "main"\nurl = "{exporter.base_url}"\n'
        'config_path = "/etc/vllm/main.yaml"\nunit = "vllm@main.service"\n'
        "[vllm.knobs.max_num_seqs]\nmin = 32\nmax = 512\nmax_step = 64\n"
    )
    saved, report = tmp_path / "imported.jsonl", tmp_path / "backtest.json"
    with Prometheus(executable, tmp_path / "prometheus", target) as prometheus:
        time.sleep(4)  # a few scrapes at 1 s
        result = subprocess.run(
            [
                sys.executable, "-m", "daemon.app.cli", "backtest",
                "--prometheus", prometheus.url, "--start", "now-3s", "--end", "now",
                "--step", "1s", "--config", str(config), "--policies", str(policies),
                "--knob", "main.max_num_seqs=256", "--save", str(saved), "--json", str(report),
            ],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    ticks = read_recording([saved]).ticks
    assert len(ticks) >= 3
    view = ticks[-1].views["main"]
    assert view.signals["running"] == 12.0
    assert view.signals["kv_usage"] == 0.8125
    assert view.knobs == {"max_num_seqs": 256.0}
    assert "healthy" not in view.signals  # the governor's own reading: not in Prometheus
    body = json.loads(report.read_text())
    brief = [(e["kind"], e["route"], e["changes"]) for e in body["a"]["timeline"]]
    # A policy's risk is "approval" unless it says otherwise.
    assert brief[:2] == [("fired", None, None), ("intent", "approval", {"max_num_seqs": 192.0})]


def test_an_unreachable_prometheus_is_a_clear_error(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "busy.yaml").write_text(POLICY)
    result = subprocess.run(
        [
            sys.executable, "-m", "daemon.app.cli", "backtest",
            "--prometheus", "http://127.0.0.1:9", "--start", "now-1m", "--selector",
            'main=instance="127.0.0.1:8000"', "--policies", str(policies),
        ],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "cannot query http://127.0.0.1:9: ConnectionError" in result.stderr
