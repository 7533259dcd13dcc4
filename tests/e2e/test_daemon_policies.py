"""The daemon evaluating policies over live signals, keeping its state across restarts."""

from __future__ import annotations

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
BUSY = """\
name: busy
description: The fixture server runs 12 requests with 81% of its KV cache in use.
targets: [main]
when: kv_usage > 0.8 && running > 10.0
for: 1s
action:
  set: {max_num_seqs: "current * 0.5"}
"""


def _policy(socket: Path, name: str) -> dict[str, Any]:
    status = call_daemon(socket, "status")
    return next(p for p in status["policies"] if p["name"] == name)


def _cli(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _eventually(check: Any, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if result := check():
                return result
        except (KeyError, StopIteration):
            pass
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")


def test_policies_fire_on_live_signals_and_survive_a_restart(short_tmp: Path) -> None:
    policies = short_tmp / "policies"
    policies.mkdir()
    (policies / "busy.yaml").write_text(BUSY)
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    with FixtureExporter(Script(metrics=page)) as exporter:
        extra = (
            f'[[vllm]]\nname = "main"\nurl = "{exporter.base_url}"\nscrape_interval_s = 0.2\n'
            "[vllm.knobs.max_num_seqs]\nmin = 32\nmax = 512\nmax_step = 128\n"
        )
        config = write_config(short_tmp, extra=extra)
        text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
        config.write_text(text.replace("[governor]\n", "[governor]\nevaluation_interval_s = 0.2\n"))
        socket = short_tmp / "control.sock"
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            busy = _eventually(
                lambda: (p := _policy(socket, "busy"))["targets"]["main"]["phase"] == "firing" and p
            )
            # The current max_num_seqs is unknown until an actuator reads it: never a guess.
            assert busy["targets"]["main"]["blocked_by"] == "unknown_current_value"
            decisions = call_daemon(socket, "status")["recent_decisions"]
            kinds = {(d["policy"], d["kind"], d["guard"]) for d in decisions}
            assert ("busy", "fired", None) in kinds
            assert ("busy", "blocked", "unknown_current_value") in kinds
            fired = next(d for d in decisions if d["kind"] == "fired")
            assert fired["evidence"]["signals"] == {"kv_usage": 0.8125, "running": 12.0}
            explained = call_daemon(socket, "explain", policy="busy")
            assert explained["targets"]["main"]["phase"] == "firing"
            text = _cli("explain", "busy", "--socket", str(socket))
            assert "when: kv_usage > 0.8 && running > 10.0" in text
            assert "kv_usage = 0.8125" in text
            status_text = _cli("status", "--socket", str(socket))
            assert "busy" in status_text
            assert "firing" in status_text
            assert "blocked by unknown_current_value" in status_text
            daemon.signal(signal.SIGTERM)
            assert daemon.process.wait(timeout=10) == 0
        fired_since = busy["targets"]["main"]["since"]
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            again = _policy(socket, "busy")["targets"]["main"]
            assert again["phase"] == "firing"
            assert abs(again["since"] - fired_since) < 0.01, "the firing episode continues"
            fired_twice = [
                d for d in call_daemon(socket, "status")["recent_decisions"] if d["kind"] == "fired"
            ]
            assert len(fired_twice) == 1, "a restart must not fire (or act) twice"


def test_a_broken_policy_edit_keeps_the_old_set_and_a_fixed_one_loads(short_tmp: Path) -> None:
    policies = short_tmp / "policies"
    policies.mkdir()
    (policies / "busy.yaml").write_text(BUSY)
    config = write_config(short_tmp, extra='[[vllm]]\nname = "main"\nurl = "http://127.0.0.1:9"\n')
    config.write_text(
        config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
    )
    socket = short_tmp / "control.sock"
    with running_daemon(config) as daemon:
        daemon.wait_for("READY=1")
        (policies / "busy.yaml").write_text(BUSY.replace("kv_usage > 0.8", "kv_usag > 0.8"))
        daemon.signal(signal.SIGHUP)
        reply = daemon.wait_for("READY=1")
        assert "reload rejected" in reply
        assert [p["name"] for p in call_daemon(socket, "status")["policies"]] == ["busy"]
        # A fixed file is picked up by the watcher, without a signal.
        (policies / "calm.yaml").write_text(BUSY.replace("name: busy", "name: calm"))
        (policies / "busy.yaml").write_text(BUSY)
        names = _eventually(
            lambda: (
                (n := [p["name"] for p in call_daemon(socket, "status")["policies"]])
                == ["busy", "calm"]
                and n
            )
        )
        assert names == ["busy", "calm"]
        assert daemon.process.poll() is None
