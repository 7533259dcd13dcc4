"""The daemon sets a service's log level live, through an admin endpoint that behaves like Envoy's.

Real processes: the daemon as a subprocess, and an aiohttp app on loopback playing Envoy's
admin ``/logging``. The policy asks for a number; the service only ever receives one of the
configured words; a change that does not hold is set back and its policy quarantined.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon, write_config
from tests.support.envoy_admin import EnvoyAdmin
from tests.support.retune import eventually, journal

pytestmark = pytest.mark.slow

QUIET = """\
name: quiet-envoy
targets: [envoy]
when: "true"
action:
  set: {log_level: "current + 20.0"}
cooldown: 1h
"""


def _config(directory: Path, admin: EnvoyAdmin, error_word: str = "error") -> Path:
    policies = directory / "policies"
    policies.mkdir(exist_ok=True)
    extra = (
        "[sources.nvml]\nenabled = false\n[sources.host]\nenabled = false\n"
        "[[http_log_level]]\n"
        'name = "envoy"\n'
        f'url = "{admin.url}/logging?level={{level}}"\n'
        f'levels = {{ DEBUG = "debug", INFO = "info", WARNING = "warning", ERROR = "{error_word}" }}\n'
        "poll_interval_s = 0.3\n"
        "stale_after_s = 5.0\n"
        "[http_log_level.knob]\nmin = 20\nmax = 40\nmax_step = 20\nmin_dwell_s = 0\n"
    )
    config = write_config(directory, extra=extra)
    text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
    config.write_text(text.replace("[governor]\n", "[governor]\nevaluation_interval_s = 0.3\n"))
    return config


def _finished(directory: Path) -> Any:
    entries = [e for e in journal(directory) if e["state"] != "open"]
    return entries[-1] if entries else None


def test_a_policy_sets_the_log_level_live_and_it_is_read_back(short_tmp: Path) -> None:
    with EnvoyAdmin() as admin:
        config = _config(short_tmp, admin)
        (short_tmp / "policies" / "quiet-envoy.yaml").write_text(QUIET)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            entry = eventually(lambda: _finished(short_tmp), "the change", daemon, 30)
            status = call_daemon(short_tmp / "control.sock", "status")
            explained = call_daemon(short_tmp / "control.sock", "explain", policy="quiet-envoy")
        assert entry["state"] == "done", entry
        assert entry["steps"] == ["planned", "set", "verifying", "verifying", "done"]
        assert entry["outcome"] == "applied and read back: log_level 20 -> 40"
        assert admin.state.level == "error"
        posts = [query for method, query in admin.state.requests if method == "POST"]
        assert posts == ["level=error"], "one change, one request, the configured word"
        assert status["quarantined"] == []
        [change] = [a for a in status["actuations"] if a["target"] == "envoy"]
        assert change["policy"] == "quiet-envoy"
        kinds = {(d["policy"], d["kind"]) for d in status["recent_decisions"]}
        assert ("quiet-envoy", "intent") in kinds, "auto risk: no approval for a live level"
        assert "envoy" in explained["targets"]


def test_a_level_the_service_refuses_is_set_back_and_the_policy_quarantined(
    short_tmp: Path,
) -> None:
    with EnvoyAdmin() as admin:
        # A configuration slip: Envoy has no level "fatal", so it answers 400.
        config = _config(short_tmp, admin, error_word="fatal")
        (short_tmp / "policies" / "quiet-envoy.yaml").write_text(QUIET)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            entry = eventually(lambda: _finished(short_tmp), "the change", daemon, 30)
            # The quarantine is entered as the outcome is reported, just after the journal.
            status = eventually(
                lambda: (
                    (s := call_daemon(short_tmp / "control.sock", "status"))["quarantined"] and s
                ),
                "the quarantine",
                daemon,
                10,
            )
        assert entry["state"] == "reverted", entry
        assert entry["steps"] == ["planned", "set", "reverting", "reverting", "reverted"]
        assert "HTTP 400" in entry["outcome"]
        assert admin.state.level == "info"
        assert status["quarantined"] == [
            {"policy": "quiet-envoy", "target": "envoy", "reason": entry["outcome"]}
        ]


def test_a_level_that_does_not_hold_is_set_back(short_tmp: Path) -> None:
    with EnvoyAdmin() as admin:
        admin.state.sticky = True  # answers 200, changes nothing
        config = _config(short_tmp, admin)
        (short_tmp / "policies" / "quiet-envoy.yaml").write_text(QUIET)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            entry = eventually(lambda: _finished(short_tmp), "the change", daemon, 30)
        assert entry["state"] == "reverted", entry
        assert "read back 20, not 40" in entry["outcome"]
        posts = [query for method, query in admin.state.requests if method == "POST"]
        assert posts == ["level=error", "level=info"]


def test_a_vllm_knob_cannot_be_aimed_at_a_live_target(short_tmp: Path) -> None:
    with EnvoyAdmin() as admin:
        config = _config(short_tmp, admin)
        bad = QUIET.replace("log_level", "max_num_seqs")
        (short_tmp / "policies" / "quiet-envoy.yaml").write_text(bad)
        checked = subprocess.run(
            [sys.executable, "-m", "daemon.app.cli", "check", "--config", str(config)],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
    assert checked.returncode != 0
    assert (
        "targets.0: envoy is a live log-level target: it takes log_level only, not max_num_seqs"
        in checked.stdout
    )
