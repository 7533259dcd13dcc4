"""The governor as a user installs it, and the demo as a new user runs it, once per session.

``uv build`` makes the sdist and the wheel from it, as a release would; the wheel goes into a
new virtual environment in a temporary directory, with exactly the dependencies of ``uv.lock``
(from uv's cache, offline: ``make test`` has just synced .venv from the same lock), and every
command runs from a directory outside the checkout with the checkout nowhere on the path.

The demo (three minutes of real processes) runs once, from that environment, as the README's
first command runs it with ``--approve auto``: it starts as soon as the wheel is installed and
runs while the other tests go on; ``tests/e2e/test_installed_package_demo.py`` asserts its
story from its ``--json`` and its output. One run instead of three (before: an approving and a denying run from the
checkout, and a shorter one from the wheel).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.locked_uv import REPO, locked_uv

# The demo's three minutes, its start and stop, and the counterfactual after it, with room for
# a loaded two-core machine.
DEMO_TIMEOUT_S = 420.0


@dataclass(frozen=True)
class Installed:
    """A wheel installed in a fresh virtual environment, and a place to run it from."""

    wheel: Path
    venv: Path
    work: Path
    env: dict[str, str]

    def command(self, *arguments: str) -> list[str]:
        """``vllm-governor ARGUMENTS`` from the environment's bin."""
        return [str(self.venv / "bin" / "vllm-governor"), *arguments]

    def run(self, *arguments: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
        """``vllm-governor ARGUMENTS`` in the work directory, to its end, at the lowest priority.

        These commands run beside the demo (:func:`start_demo`), whose simulated server runs
        in real time: at ``nice`` 19 they take what CPU it leaves, so that they do not slow
        its steps and change its story.
        """
        return subprocess.run(
            self.command(*arguments),
            cwd=self.work, env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=timeout_s, check=False, preexec_fn=_lowest_priority,
        )  # fmt: skip


def _lowest_priority() -> None:
    os.nice(19)


def _checked(command: Sequence[str | Path], env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"


def install(root: Path) -> Installed:
    """Build the wheel and install it with uv.lock's versions into a new environment in ``root``."""
    uv = locked_uv()
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


@dataclass
class DemoRun:
    """One ``vllm-governor demo`` started in the background; :meth:`finish` waits for it."""

    process: subprocess.Popen[str]
    json_path: Path
    plot_path: Path
    output: str = ""
    summary: dict[str, Any] = field(default_factory=dict)

    def finish(self) -> dict[str, Any]:
        """Wait for the demo's end; its ``--json`` summary (it must have exited 0)."""
        if self.process.returncode is None:
            self.output, _ = self.process.communicate(timeout=DEMO_TIMEOUT_S)
        assert self.process.returncode == 0, self.output[-6000:]
        if not self.summary:
            self.summary = json.loads(self.json_path.read_text())
        return self.summary

    def stop(self) -> None:
        """Kill it if it still runs (a failed or interrupted session leaves nothing running)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


def start_demo(installed: Installed, *arguments: str) -> DemoRun:
    """The demo from the installed package, approving automatically, with its JSON and plot."""
    json_path, plot_path = installed.work / "demo.json", installed.work / "demo.png"
    process = subprocess.Popen(
        installed.command(
            "demo", "--approve", "auto", "--json", str(json_path), "--plot", str(plot_path),
            *arguments,
        ),
        cwd=installed.work, env=installed.env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    return DemoRun(process, json_path, plot_path)
