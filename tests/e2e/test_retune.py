"""The daemon retunes a running ``sim serve`` under supervisord, and reverts what makes it worse.

Everything is real: the daemon is a subprocess, supervisord restarts the sim, the policy fires
on the signals the daemon scrapes, verification reads them too, and the test watches the
journal in the state database.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon
from tests.support.retune import (
    eventually,
    finished,
    governor_config,
    journal,
    kill_when,
    running_now,
    step_reached,
    write_policy,
)
from tests.support.supervised_sim import SATURATING_WORKLOAD, supervised_sim

pytestmark = [pytest.mark.service("supervisord"), pytest.mark.slow]

# 600 blocks of 16 tokens hold 8 such sequences, not 32: more sequences mean preemptions once
# the KV cache fills, about 2 s after the start, hence a verification window of 4 s.
SMALL_KV_CACHE = "max-num-seqs: 8\nnum-gpu-blocks-override: 600\n"


def test_a_policy_retunes_max_num_seqs_of_a_loaded_server(short_tmp: Path) -> None:
    with supervised_sim(short_tmp, "max-num-seqs: 8\n", load=SATURATING_WORKLOAD) as sim:
        # Under a saturating load both verification windows sit in a queue that grows from the
        # moment the load (re)started, so their TTFT says more about timing on a busy machine
        # than about the change: this test is about the path, and the TTFT rule has its own
        # unit tests (tests/unit/actuators). Preemptions and errors still count here.
        config = governor_config(short_tmp, sim, max_ttft_ratio=50.0)
        write_policy(short_tmp, "waiting > 2.0")
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            done = eventually(finished(short_tmp), "the change finished", daemon)
            assert done["state"] == "done", done
            assert done["steps"] == [
                "planned", "written", "drained", "restarting", "restarted", "ready",
                "verifying", "verifying", "done",
            ]  # fmt: skip
            assert sim.vllm_yaml.read_text().endswith("max-num-seqs: 16\n")
            # Serving under the same load, the server now runs 16 sequences at once.
            eventually(lambda: running_now(sim) == 16 or None, "16 running", daemon, 20)
            status = call_daemon(short_tmp / "control.sock", "status")
            [change] = status["actuations"]
            assert change["state"] == "done"
            assert set(change["timings"]) >= {"write", "restart", "ready", "verify"}
            kinds = {(d["policy"], d["kind"]) for d in status["recent_decisions"]}
            assert ("more-seqs", "intent") in kinds
            assert sim.spawns() == 2
            # The plan the policy would make now: 16 is its envelope's max, so nothing to do.
            shown = subprocess.run(
                [sys.executable, "-m", "daemon.app.cli", "apply", "--dry-run",
                 "--policy", "more-seqs", "--config", str(config)],
                capture_output=True, text=True, check=False, timeout=60,
            )  # fmt: skip
            assert shown.returncode == 0, shown.stderr
            assert "sim: blocked: no_change" in shown.stdout
            by_hand = subprocess.run(
                [sys.executable, "-m", "daemon.app.cli", "apply", "--dry-run", "--instance", "sim",
                 "--set", "max_num_seqs=12", "--config", str(config)],
                capture_output=True, text=True, check=False, timeout=60,
            )  # fmt: skip
            assert by_hand.returncode == 0, by_hand.stderr
            assert "-max-num-seqs: 16\n+max-num-seqs: 12" in by_hand.stdout
            assert f'then run (no shell): ["supervisorctl", "-c", "{sim.conf}"' in by_hand.stdout
            assert sim.vllm_yaml.read_text().endswith("max-num-seqs: 16\n"), "a dry run"
            shown_status = subprocess.run(
                [sys.executable, "-m", "daemon.app.cli", "status", "--config", str(config)],
                capture_output=True, text=True, check=False, timeout=60,
            )  # fmt: skip
            assert "#1 more-seqs on sim: done: applied and verified" in shown_status.stdout
            assert "recent changes:" in shown_status.stdout


def test_a_change_that_preempts_is_reverted_even_by_the_next_governor(short_tmp: Path) -> None:
    with supervised_sim(short_tmp, SMALL_KV_CACHE, load=SATURATING_WORKLOAD) as sim:
        config = governor_config(short_tmp, sim, max_seqs=32, verify_window_s=4.0)
        write_policy(short_tmp, "waiting > 2.0", factor=4.0)
        # Killed while it reverts: the revert restart is under way.
        kill_when(config, step_reached(short_tmp, "revert_restarting"), "the revert")
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            entry = eventually(finished(short_tmp), "the reconciliation", daemon)
            status = call_daemon(short_tmp / "control.sock", "status")
        assert entry["state"] == "reverted", entry
        assert "preemptions_per_s" in entry["outcome"], entry["outcome"]
        assert entry["steps"][-3:] == ["revert_verifying", "revert_verifying", "reverted"]
        assert sim.vllm_yaml.read_text() == f"served-model-name: sim/test-model\n{SMALL_KV_CACHE}"
        assert sim.spawns() == 3, "the change's restart and the revert's, once each"
        assert status["quarantined"] == [
            {"policy": "more-seqs", "target": "sim", "reason": entry["outcome"]}
        ]
        alerts = [d for d in status["recent_decisions"] if d["kind"] == "alert"]
        assert alerts[0]["details"]["quarantined"] is True
        assert len(journal(short_tmp)) == 1
