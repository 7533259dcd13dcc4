"""Record from a real daemon, then backtest the recording: the daemon's decisions come back.

The daemon scrapes a fixture vLLM whose page switches from calm to busy and back while it
records; a crash's torn line is appended; ``vllm-governor backtest`` (a real process) replays
the file through the same policies (and through a version with another threshold).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"
BUSY_LINE = 'vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 12.0'
POLICY = """\
name: busy
description: The fixture server runs more than {threshold} requests with its KV cache full.
targets: [main]
when: kv_usage > 0.8 && running > {threshold}.0
for: 1s
action:
  set: {{max_num_seqs: "current * 0.5"}}
"""


def _backtest(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "backtest", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _wait_for_decision(socket: Path, kind: str, timeout_s: float = 20.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        decisions: list[dict[str, Any]] = call_daemon(socket, "status")["recent_decisions"]
        if any(d["kind"] == kind for d in decisions):
            return decisions
        time.sleep(0.2)
    raise AssertionError(f"the daemon made no {kind} decision in time")


def test_a_recording_of_the_daemon_replays_to_its_decisions(short_tmp: Path) -> None:
    policies, strict = short_tmp / "policies", short_tmp / "strict"
    for directory, threshold in ((policies, 10), (strict, 20)):
        directory.mkdir()
        (directory / "busy.yaml").write_text(POLICY.format(threshold=threshold))
    busy = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    assert BUSY_LINE.encode() in busy
    calm = busy.replace(BUSY_LINE.encode(), BUSY_LINE.replace("12.0", "2.0").encode())
    recording = short_tmp / "recording.jsonl"
    with FixtureExporter(Script(metrics=calm)) as exporter:
        extra = (
            f'[[vllm]]\nname = "main"\nurl = "{exporter.base_url}"\nscrape_interval_s = 0.2\n'
            "[vllm.knobs.max_num_seqs]\nmin = 32\nmax = 512\nmax_step = 128\n"
            f'[recording]\nenabled = true\npath = "{recording}"\n'
        )
        config = write_config(short_tmp, extra=extra)
        text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
        config.write_text(text.replace("[governor]\n", "[governor]\nevaluation_interval_s = 0.2\n"))
        socket = short_tmp / "control.sock"
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            time.sleep(1.0)
            exporter.script.metrics = busy
            _wait_for_decision(socket, "fired")
            exporter.script.metrics = calm
            decisions = _wait_for_decision(socket, "resolved")
            daemon.signal(signal.SIGTERM)
            assert daemon.process.wait(timeout=10) == 0
    lines = recording.read_text().splitlines()
    assert len(lines) >= 10
    with recording.open("a") as file:
        file.write(lines[-1][: len(lines[-1]) // 2])  # a crash in the middle of a line
    daemon_kinds = {(d["policy"], d["kind"], d["guard"]) for d in decisions}
    assert ("busy", "blocked", "unknown_current_value") in daemon_kinds

    result = _backtest(
        "--recording", str(recording), "--policies", str(policies), "--against", str(strict),
        "--config", str(config), "--json", str(short_tmp / "backtest.json"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"warning: {recording}:{len(lines) + 1}: skipped: not a whole JSON line" in (
        result.stderr
    )
    body = json.loads((short_tmp / "backtest.json").read_text())
    assert body["recording"]["ticks"] == len(lines)
    assert body["recording"]["targets"] == ["main"]
    replayed = {(e["policy"], e["kind"], e["guard"]) for e in body["a"]["timeline"]}
    # Everything the daemon decided, the backtest decides from what the daemon recorded.
    assert daemon_kinds <= replayed
    assert [e["kind"] for e in body["b"]["timeline"]] == []  # 12 running never pass 20
    only_a = [entry["a"]["kind"] for entry in body["diff"] if entry["side"] == "only_a"]
    assert only_a == ["fired", "blocked", "resolved"]
    assert "busy  fired  kv_usage=0.8125 running=12" in result.stdout
    assert "diff: 3 only in A, 0 only in B, 0 different" in result.stdout
