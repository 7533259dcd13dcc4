"""``status`` and ``freezes`` show what used to be hidden: issue 19, finding 1.

The daemon is a subprocess; the CLI asks it over its control socket. Before, a freeze showed
nowhere, a pending policy said nothing of when it would act, and a policy file the watcher
refused left only a log line.
"""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"
PATIENT = """\
name: patient
description: Holds for an hour before it halves max_num_seqs.
targets: [main]
when: kv_usage > 0.8
for: 1h
action:
  set: {max_num_seqs: "current * 0.5"}
"""


def cli(config: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", *args, "--config", str(config)],
        capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


def eventually(check: Any, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")


def test_status_shows_freezes_pending_policies_and_refused_reloads(short_tmp: Path) -> None:
    policies = short_tmp / "policies"
    policies.mkdir()
    (policies / "patient.yaml").write_text(PATIENT)
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    with FixtureExporter(Script(metrics=page)) as exporter:
        extra = (
            f'[[vllm]]\nname = "main"\nurl = "{exporter.base_url}"\nscrape_interval_s = 0.2\n'
            "[vllm.knobs.max_num_seqs]\nmin = 32\nmax = 512\nmax_step = 128\n"
        )
        config = write_config(short_tmp, extra=extra)
        text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
        config.write_text(text.replace("[governor]\n", "[governor]\nevaluation_interval_s = 0.2\n"))
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            cli(config, "freeze", "main", "--for", "2h", "--reason", "incident 42")

            status = eventually(lambda: _pending(json.loads(cli(config, "status", "--json"))))
            [freeze] = status["freezes"]
            assert freeze["target"] == "main"
            assert freeze["by"] == f"unix:{getpass.getuser()}"
            assert freeze["reason"] == "incident 42"
            assert freeze["until"] is not None
            main = status["policies"][0]["targets"]["main"]
            assert abs(main["fires_at"] - (main["since"] + 3600)) < 0.01
            assert main["acts"] is True
            shown = cli(config, "status")
            assert "frozen (no change is applied):\n  main until " in shown
            assert f": incident 42 (by unix:{getpass.getuser()})" in shown
            assert "pending:\n  patient on main: will act in 59m" in shown

            # A broken edit, picked up by the watcher (no SIGHUP): refused, and said so.
            (policies / "patient.yaml").write_text(PATIENT.replace("kv_usage", "kv_usag"))
            refused = eventually(
                lambda: json.loads(cli(config, "status", "--json"))["last_rejected_reload"]
            )
            assert refused["via"] == "policy file watcher"
            assert "kv_usag" in refused["error"]
            shown = cli(config, "status")
            assert "last reload rejected at " in shown
            assert "(via policy file watcher; the configuration in force is the one before" in shown

            listed = cli(config, "freezes")
            assert listed.startswith(
                f"freezes in force (from the running daemon (pid {daemon.process.pid})):\n"
            )
            assert "  main until " in listed
        offline = cli(config, "freezes")
        assert offline.startswith(
            f"freezes in force (no daemon running; read from the freeze files in {short_tmp / 'state'}):\n"
        )
        assert "incident 42" in offline
        assert json.loads(cli(config, "freezes", "--json"))["freezes"][0]["target"] == "main"


def _pending(status: dict[str, Any]) -> dict[str, Any] | None:
    targets = status["policies"][0]["targets"]
    return status if targets.get("main", {}).get("phase") == "pending" else None
