"""``vllm-governor explain`` as an operator runs it: with the daemon, and without one."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from tests.support.daemon import running_daemon, write_config
from tests.support.fixture_exporter import FixtureExporter, Script

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-metrics"
BUSY = """\
name: busy
description: The fixture server runs 12 requests.
targets: [main]
when: running > 10.0
for: 2m
action:
  set: {max_num_seqs: "current * 0.5"}
"""


def _config(directory: Path, exporter: FixtureExporter) -> Path:
    policies = directory / "policies"
    policies.mkdir()
    (policies / "busy.yaml").write_text(BUSY)
    extra = (
        f'[[vllm]]\nname = "main"\nurl = "{exporter.base_url}"\nscrape_interval_s = 0.2\n'
        "[sources.nvml]\nenabled = false\n"
    )
    config = write_config(directory, extra=extra)
    text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
    config.write_text(text.replace("[governor]\n", "[governor]\nevaluation_interval_s = 0.2\n"))
    return config


def _explain(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "explain", "busy", "--config", str(config),
         "--window", "1.5"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )  # fmt: skip


def test_without_a_daemon_it_collects_and_explains_a_fresh_start(short_tmp: Path) -> None:
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    with FixtureExporter(Script(metrics=page)) as exporter:
        result = _explain(_config(short_tmp, exporter))
    assert result.returncode == 0, result.stderr
    assert "no daemon running; collecting for 1.5 s" in result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        "busy: The fixture server runs 12 requests.",
        "  (no daemon: a governor started now, on 1.5 s of signals collected here, which its "
        "rates and quantiles cover)",
        "  target main: inactive -> pending",
        "    when: running > 10.0  (for 120 s)",
    ]
    assert "      running = 12.0" in lines
    assert "    will act in 2m if the condition keeps holding" in lines


def test_with_a_daemon_it_says_how_long_a_pending_policy_has_left(short_tmp: Path) -> None:
    page = (FIXTURES / "v0.33-synthesized.txt").read_bytes()
    with FixtureExporter(Script(metrics=page)) as exporter:
        config = _config(short_tmp, exporter)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            time.sleep(2.0)  # pending for a while: less than the whole `for` is left
            result = _explain(config)
    assert result.returncode == 0, result.stderr
    assert "no daemon" not in result.stdout + result.stderr
    assert "  target main: pending -> pending" in result.stdout
    left = re.search(r"will act in 1m(\d+)s if the condition keeps holding", result.stdout)
    assert left is not None, result.stdout
    assert 30 <= int(left.group(1)) < 59
