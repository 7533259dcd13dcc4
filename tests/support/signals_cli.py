"""``vllm-governor signals --json`` run as a user runs it, against one vLLM server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.daemon import write_config

Rows = dict[str, dict[str, Any]]


def signals_config(directory: Path, url: str, *, window_s: float) -> Path:
    """A governor config reading one server named ``main`` at ``url``, no GPU or host source."""
    extra = (
        f'[signals]\nwindow_s = {window_s}\n[[vllm]]\nname = "main"\nurl = "{url}"\n'
        # A vLLM front end busy on a shared 2-core machine may take seconds to answer, and a
        # scrape's deadline is for the whole exchange: at 3 s, a CI run under load got one
        # page in 8 s, too few for any rate or quantile.
        "scrape_interval_s = 0.5\nscrape_timeout_s = 6.0\nstale_after_s = 15.0\n[sources.nvml]\nenabled = false\n"
        "[sources.host]\nenabled = false\n"
    )
    return write_config(directory, extra=extra)


def collect(config: Path, window_s: float) -> Rows:
    """One-off collection for ``window_s``: the server-wide row of each signal of ``main``."""
    result = subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "signals", "--config", str(config), "--json",
         "--window", str(window_s)],
        capture_output=True,
        text=True,
        check=False,
        timeout=window_s + 60,
        # A session of its own, as a user's shell gives it: the kernel shares the CPU between
        # sessions (autogroups) first, so the test's own load threads do not starve it.
        start_new_session=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return {
        row["name"]: row
        for row in answer["signals"]
        if row["target"] == "main" and "engine" not in row["labels"]
    }
