"""Helpers of the retune end-to-end tests: the governor's config, its policy, its journal."""

from __future__ import annotations

import json
import os
import pwd
import re
import signal
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from tests.support.daemon import RunningDaemon, running_daemon, write_config
from tests.support.supervised_sim import SupervisedSim

T = TypeVar("T")

MORE_SEQS = """\
name: more-seqs
targets: [sim]
when: {condition}
action:
  set: {{max_num_seqs: "current * {factor}"}}
  risk: {risk}
cooldown: 1h
"""


def governor_config(
    directory: Path,
    sim: SupervisedSim,
    *,
    verify_window_s: float = 2.0,
    max_seqs: int = 16,
    max_ttft_ratio: float = 1.5,
) -> Path:
    policies = directory / "policies"
    policies.mkdir(exist_ok=True)
    vllm = f"""
[[vllm]]
name = "sim"
url = "{sim.url}"
scrape_interval_s = 0.5
config_path = "{sim.vllm_yaml}"
env_file = "{sim.env_file}"
restart_command = {json.dumps(sim.restart_command())}
restart_timeout_s = 30.0
ready_timeout_s = 20.0
verify_window_s = {verify_window_s}
verify_max_ttft_p95_ratio = {max_ttft_ratio}
[vllm.knobs.max_num_seqs]
min = 4
max = {max_seqs}
max_step = {max_seqs}
min_dwell_s = 0
hourly_budget = 5
"""
    config = write_config(directory, extra=vllm)
    text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
    text = text.replace("[governor]\n", "[governor]\nevaluation_interval_s = 0.5\n")
    config.write_text(text + "[sources.nvml]\nenabled = false\n[sources.host]\nenabled = false\n")
    return config


def write_policy(
    directory: Path, condition: str, factor: float = 2.0, *, risk: str = "auto"
) -> None:
    text = MORE_SEQS.format(condition=condition, factor=f"{factor:.1f}", risk=risk)
    (directory / "policies" / "more-seqs.yaml").write_text(text)


def unix_user() -> str:
    """The approver identity of whoever runs this process, as the control socket sees it."""
    return f"unix:{pwd.getpwuid(os.getuid()).pw_name}"


def approval_config(
    directory: Path,
    sim: SupervisedSim,
    approvers: Sequence[str],
    *,
    extra: str = "",
    verify_window_s: float = 2.0,
) -> Path:
    """The governor's config with ``extra`` and an approval-risk ``more-seqs`` policy.

    The policy doubles ``max_num_seqs`` while more than 2 requests wait; each of ``approvers``
    alone may decide its restart proposals. Under a saturating load both verification windows
    sit in a growing queue, so the TTFT ratio says more about a busy machine than about the
    change: it is relaxed to 50 here (the rule has its own unit tests).
    """
    config = governor_config(directory, sim, max_ttft_ratio=50.0, verify_window_s=verify_window_s)
    users = ", ".join(json.dumps(user) for user in approvers)
    restart = f"[approvals.restart]\nusers = [{users}]\ntwo_person = false\n"
    config.write_text(config.read_text() + extra + restart)
    write_policy(directory, "waiting > 2.0", risk="approval")
    return config


def journal(directory: Path) -> list[dict[str, Any]]:
    """Every actuation row, oldest first, with its steps."""
    path = directory / "state" / "state.sqlite3"
    if not path.exists():
        return []
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
        try:
            rows = db.execute(
                "SELECT id, state, step, outcome, timings, facts FROM actuations"
            ).fetchall()
        except sqlite3.OperationalError:  # the daemon has not created the tables yet
            return []
        entries = []
        for entry_id, state, step, outcome, timings, facts in rows:
            steps = db.execute(
                "SELECT step FROM actuation_steps WHERE actuation = ? ORDER BY rowid", (entry_id,)
            )
            entries.append(
                {
                    "state": state,
                    "step": step,
                    "outcome": outcome,
                    "timings": json.loads(timings),
                    "facts": json.loads(facts),
                    "steps": [name for (name,) in steps],
                }
            )
    return entries


def eventually(
    check: Callable[[], T | None], what: str, daemon: RunningDaemon, timeout_s: float = 40
) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (found := check()) is not None:
            return found
        if daemon.process.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout_s} s; log:\n{daemon.log_text()[-6000:]}")


def step_reached(directory: Path, step: str) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        entries = journal(directory)
        return entries[-1] if entries and entries[-1]["step"] == step else None

    return check


def finished(directory: Path) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        entries = journal(directory)
        return entries[-1] if entries and entries[-1]["state"] != "open" else None

    return check


def running_now(sim: SupervisedSim) -> float | None:
    answer = sim.get("/metrics")
    if answer is None:
        return None
    match = re.search(r'^vllm:num_requests_running\{[^}]*engine="0"[^}]*\} (\S+)$', answer[1], re.M)
    return float(match.group(1)) if match else None


def kill_when(
    config: Path,
    check: Callable[[], object | None],
    what: str,
    *,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run a governor on ``config`` until ``check`` finds its moment, then SIGKILL it."""
    with running_daemon(config, env=dict(env or {})) as daemon:
        daemon.wait_for("READY=1")
        eventually(check, what, daemon)
        daemon.process.send_signal(signal.SIGKILL)
        daemon.process.wait(timeout=10)
