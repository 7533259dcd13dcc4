"""The governor as a user installs it: a wheel in a fresh virtual environment, run elsewhere.

Everything before this test ran the product from its checkout, which hid that the wheel lacked
the default pack, the example configuration, the unit and the polkit rule (issue 19, finding
11: an installed ``simulate`` failed with "policies failed to load: …/site-packages/policies").
Here ``uv build`` makes the sdist and the wheel from it, as a release would; the wheel goes into
a new virtual environment in a temporary directory, with exactly the dependencies of
``uv.lock`` (from uv's cache, offline: ``make test`` has just synced .venv from the same lock),
and every command runs from a directory outside the checkout with the checkout nowhere on the
path (:mod:`tests.support.installed_wheel`). The build and install take a few seconds,
``check``, ``test`` and a two-minute ``simulate`` a few more. The demo, as the README's first
command runs it, starts from the installed package with the first test and runs its three
minutes while the others go on; its story is asserted in
``tests/e2e/test_installed_package_demo.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.support.installed_wheel import DemoRun, Installed
from tests.support.xdist_groups import HEAVY

# One worker runs both files, in order (scripts/test runs two): the wheel is installed and the
# demo started once, by the first of these tests to run (test_demo.py).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(420),
    HEAVY,
]

SHIPPED = (
    "daemon/shipped/config.example.toml",
    "daemon/shipped/policies/ttft-queue.yaml",
    "daemon/shipped/policies/tests/ttft-queue.test.yaml",
    "daemon/shipped/systemd/vllm-governor.service",
    "daemon/shipped/systemd/50-vllm-governor.rules",
    "simulator/profiles/llama-3.1-8b-h100-tp1.yaml",
    "simulator/workloads/demo-traffic-shift.yaml",
    "simulator/traces/azure-llm-2023-conv.csv",
)


def test_the_wheel_carries_what_ships_and_runs_from_the_environment(
    installed: Installed, installed_demo: DemoRun
) -> None:
    # installed_demo: the demo starts now and runs while the tests below go on; its story is
    # asserted at its end (tests/e2e/test_installed_package_demo.py).
    assert installed_demo.process.pid > 0
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert [name for name in SHIPPED if name not in names] == []
    imported = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c", "import daemon; print(daemon.__file__)"],
        cwd=installed.work, env=installed.env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert Path(imported.stdout.strip()).is_relative_to(installed.venv)

    listed = installed.run("shipped")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    for name in ("config.example.toml", "policies", "systemd/vllm-governor.service"):
        one = installed.run("shipped", name)
        assert one.returncode == 0, one.stderr
        path = Path(one.stdout.strip())
        assert path.exists()
        assert path.is_relative_to(installed.venv)
        assert str(path) in listed.stdout


def test_check_and_the_policy_tests_pass_on_a_copy_of_the_shipped_pack(
    installed: Installed,
) -> None:
    config = installed.run("shipped", "config.example.toml").stdout.strip()
    pack = installed.work / "my-policies"
    copied = installed.run("policies", "copy", str(pack))
    assert copied.returncode == 0, copied.stderr
    assert (pack / "ttft-queue.yaml").is_file()
    assert (pack / "tests" / "ttft-queue.test.yaml").is_file()
    assert f"{pack / 'ttft-queue.yaml'}" in copied.stdout

    checked = installed.run("check", "--config", config, str(pack))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("ok:"), checked.stdout
    tested = installed.run("test", str(pack / "tests"))
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr
    assert ", 0 failed" in tested.stdout

    again = installed.run("policies", "copy", str(pack))
    assert again.returncode == 1
    assert "nothing was written" in again.stderr


# Two minutes of conversation traffic with a one-minute burst at six times the rate: enough for
# the default pack's admission-cap (for: 10s) to act, short enough to simulate in seconds (the
# shipped workloads run for half an hour, minutes of wall time now that simulate runs the
# daemon's own governor).
SHORT_BURST = """\
name: short-burst
description: two minutes of conversation traffic with a one-minute burst at 6x
duration_s: 120
seed: 7
arrivals: {rate_rps: 5.5, cv: 1.1}
bursts:
  - {start_s: 30, duration_s: 60, multiplier: 6}
prompt_tokens: {median: 1020, p90: 2734, min: 1, max: 8192}
output_tokens: {median: 129, p90: 424, min: 1, max: 1000}
"""


def test_simulate_runs_the_default_pack(installed: Installed) -> None:
    workload, report = installed.work / "short-burst.yaml", installed.work / "simulate.json"
    workload.write_text(SHORT_BURST)
    done = installed.run(
        "simulate", "--workload", str(workload), "--baselines", "governor",
        "--json", str(report), timeout_s=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    governor = json.loads(report.read_text())["controllers"]["governor"]
    # The default pack acted on the burst: it was found and loaded.
    assert governor["actions"] > 0


def _stated_minimum(refusal: subprocess.CompletedProcess[str]) -> float:
    """The shortest ``--duration`` a refused demo asks for, as it says it."""
    assert refusal.returncode == 2, refusal.stdout + refusal.stderr
    assert "no policy directory" not in refusal.stderr
    found = re.search(
        r"use --duration (\d+(?:\.\d+)?) or more|at least (\d+) seconds", refusal.stderr
    )
    assert found, refusal.stderr
    return float(found.group(1) or found.group(2))


def test_a_demo_too_short_for_its_story_is_refused_with_the_minimum(installed: Installed) -> None:
    # For the shipped pack the demo must have found and read it to say so.
    assert _stated_minimum(installed.run("demo", "--duration", "1")) > 1
