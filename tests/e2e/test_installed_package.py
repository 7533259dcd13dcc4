"""The governor as a user installs it: a wheel in a fresh virtual environment, run elsewhere.

Everything before this test ran the product from its checkout, which hid that the wheel lacked
the default pack, the example configuration, the unit and the polkit rule (issue 19, finding
11: an installed ``simulate`` failed with "policies failed to load: …/site-packages/policies").
Here ``uv build`` makes the sdist and the wheel from it, as a release would; the wheel goes into
a new virtual environment in a temporary directory, with exactly the dependencies of
``uv.lock`` (from uv's cache, offline: ``make test`` has just synced .venv from the same lock),
and every command runs from a directory outside the checkout with the checkout nowhere on the
path. The build and install take a few seconds, ``check``, ``test`` and a two-minute
``simulate`` a few more; the demo, the last test, runs for the shortest duration it accepts with a pack whose
ttft-queue waits 15 s (two minutes and a quarter, plus start and stop).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.locked_uv import REPO, locked_uv

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SHIPPED = (
    "daemon/shipped/config.example.toml",
    "daemon/shipped/policies/ttft-queue.yaml",
    "daemon/shipped/policies/tests/ttft-queue.test.yaml",
    "daemon/shipped/systemd/vllm-governor.service",
    "daemon/shipped/systemd/50-vllm-governor.rules",
    "simulator/profiles/llama-3.1-8b-h100-tp1.yaml",
    "simulator/workloads/demo-prefill-budget.yaml",
    "simulator/traces/azure-llm-2023-conv.csv",
)


@dataclass(frozen=True)
class Installed:
    """A wheel installed in a fresh virtual environment, and a place to run it from."""

    wheel: Path
    venv: Path
    work: Path
    env: dict[str, str]

    def run(self, *arguments: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
        """``vllm-governor ARGUMENTS`` from the environment's bin, in the work directory."""
        return subprocess.run(
            [str(self.venv / "bin" / "vllm-governor"), *arguments],
            cwd=self.work, env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=timeout_s, check=False,
        )  # fmt: skip


def _checked(command: Sequence[str | Path], env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    uv = locked_uv()
    root = tmp_path_factory.mktemp("installed")
    assert not root.resolve().is_relative_to(REPO), "the install must happen outside the checkout"
    # Nothing of the test's own environment (.venv, the checkout on PYTHONPATH) may leak in.
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env |= {"UV_PYTHON_DOWNLOADS": "never", "PYTHONDONTWRITEBYTECODE": "1"}
    dist, venv, work = root / "dist", root / "venv", root / "work"
    work.mkdir()
    _checked([uv, "build", "--offline", "--quiet", "--out-dir", dist, REPO], env, root)
    (wheel,) = dist.glob("*.whl")
    python = venv / "bin" / "python"
    # uv.lock's versions, as the systemd install does it (uv sync --frozen --no-dev), into a
    # new environment here, without the project (installed from the wheel next). uv sync reads
    # the lock's own URLs, so it needs only the wheels in uv's cache; a resolution (uv pip
    # install -r of an export) would also need the registry's index, which a fresh machine's
    # cache does not hold. uv pip check then proves the wheel's requirements met by the lock's.
    _checked(
        [uv, "sync", "--frozen", "--offline", "--quiet", "--no-dev", "--no-install-project",
         "--project", REPO, "--python", sys.executable],
        env | {"UV_PROJECT_ENVIRONMENT": str(venv)}, root,
    )  # fmt: skip
    _checked(
        [uv, "pip", "install", "--offline", "--quiet", "--no-deps", "--python", python, wheel],
        env, root,
    )  # fmt: skip
    _checked([uv, "pip", "check", "--offline", "--quiet", "--python", python], env, root)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return Installed(wheel, venv, work, env)


def test_the_wheel_carries_what_ships_and_runs_from_the_environment(installed: Installed) -> None:
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


def test_a_short_demo_runs_to_its_end(installed: Installed) -> None:
    # Too short a demo is refused with the minimum its pack needs; for the shipped pack the
    # demo must have found and read it to say so.
    assert _stated_minimum(installed.run("demo", "--duration", "1")) > 1
    # The demo of a copied pack whose ttft-queue waits 15 s, not 3 min, at the shortest
    # duration it accepts: the same processes and story as the shipped pack's, in about
    # two minutes instead of five.
    pack = installed.work / "fast-pack"
    assert installed.run("policies", "copy", str(pack)).returncode == 0
    queue = pack / "ttft-queue.yaml"
    assert "\nfor: 3m\n" in queue.read_text()
    queue.write_text(queue.read_text().replace("\nfor: 3m\n", "\nfor: 15s\n"))
    duration = _stated_minimum(installed.run("demo", "--duration", "1", "--policies", str(pack)))

    summary, plot = installed.work / "demo.json", installed.work / "demo.png"
    done = installed.run(
        "demo", "--duration", f"{duration:g}", "--approve", "auto", "--policies", str(pack),
        "--json", str(summary), "--plot", str(plot), timeout_s=duration + 120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr
    assert json.loads(summary.read_text())["policies"] == str(pack.resolve())
    assert plot.read_bytes().startswith(PNG_MAGIC)
