"""``vllm-governor demo`` from the checkout, stopped with Ctrl-C: nothing is left running.

The demo's story (three minutes of real processes) is asserted once per session, on the run
from the installed package (``tests/e2e/test_installed_package_demo.py``, through the
``installed_demo`` fixture): before, this module ran an approving and a denying demo of its
own, and the installed-package test a third. What is left here needs the checkout and only
the demo's first seconds: a Ctrl-C as soon as the simulated server serves stops the
governor, then the server, still sums up and exits 130. It starts the session's demo and
runs beside it, at the lowest priority.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.demo_checks import assert_left_nothing
from tests.support.installed_wheel import DemoRun
from tests.support.xdist_groups import HEAVY

# With the installed-package tests on one xdist worker: the session's demo is theirs.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
    HEAVY,
]


def _as_from_a_terminal_at_the_lowest_priority() -> None:
    """Ctrl-C as a terminal delivers it: a suite started in the background (``cmd &`` in a
    script) passes SIGINT on ignored, and Python then never raises KeyboardInterrupt. At
    ``nice`` 19: this demo runs beside the session's real one, whose server runs in real time."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.nice(19)


def test_ctrl_c_stops_everything_and_still_sums_up(
    short_tmp: Path, installed_demo: DemoRun
) -> None:
    # installed_demo: the session's demo starts now, so that this test and the installed
    # package's run beside it (its story: tests/e2e/test_installed_package_demo.py).
    assert installed_demo.process.pid > 0
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.app.cli", "demo", "--approve", "deny",
         "--plot", str(short_tmp / "p.png")],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_as_from_a_terminal_at_the_lowest_priority,  # noqa: PLW1509 - no threads here
    )  # fmt: skip
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if "the simulated vLLM serves on" in line:
            break
    process.send_signal(signal.SIGINT)
    try:
        rest, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()  # leave nothing running for the tests after this one
        process.communicate()
        raise
    output = "".join(lines) + rest
    assert process.returncode == 130, output
    assert "interrupted: stopping the governor and the simulated server" in output
    assert "[demo] summary" in output
    assert_left_nothing(output)
