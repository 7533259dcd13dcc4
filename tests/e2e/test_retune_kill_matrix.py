"""The governor killed (SIGKILL) at each step of a change: its next start finishes or reverts.

Each case ends with one healthy server on a journaled config, one outcome in the journal, and
no restart done twice. The kill lands where the journal shows the step: naturally for a restart
(supervisorctl takes seconds) and a verification (its window), and through the actuator's test
hook (a pause after a journaled step) for the instants between steps. Every step of a revert
has its case here, but for its restart under way, which is ``test_retune.py``'s.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import running_daemon
from tests.support.retune import (
    eventually,
    finished,
    governor_config,
    journal,
    kill_when,
    step_reached,
    write_policy,
)
from tests.support.supervised_sim import SATURATING_WORKLOAD, SupervisedSim, supervised_sim

pytestmark = [pytest.mark.service("supervisord"), pytest.mark.slow]

SMALL_POOL_BLOCKS = 600  # 32 sequences of the saturating load preempt in it; 8 do not


@dataclass(frozen=True)
class Case:
    """Where the governor dies, and how the next one must end the change."""

    hold: str  # the test hook's STEP:SECONDS, or "" for none
    kill_when: str  # the journaled step that triggers the kill
    state: str
    last_steps: list[str]
    spawns: int
    seqs: int
    verify_window_s: float = 2.0
    restarting: bool = False  # kill only once supervisord is restarting the sim
    draining: bool = False  # kill while the old sim drains on SIGTERM (before the new spawn)
    # The change preempts in a small KV cache (from 8 to 32 sequences) and is reverted: kill
    # while the revert's restart drains the failed server.
    reverting: bool = False


# How the next governor ends a revert it finds: with the revert's one restart still to do, or
# with only the verification of the server the revert's restart brought back.
REVERT_AGAIN = [
    "reconciling", "restored", "revert_restarting", "revert_restarted", "revert_ready",
    "revert_verifying", "revert_verifying", "reverted",
]  # fmt: skip
REVERIFY = ["reconciling", "restored", "revert_ready", "revert_verifying", "revert_verifying",
            "reverted"]  # fmt: skip

CASES = {
    "before the write": Case(
        "planned:60", "planned", "abandoned", ["reconciling", "restored", "abandoned"], 1, 8
    ),
    "after the write, before the restart": Case(
        "written:60", "written", "abandoned", ["reconciling", "restored", "abandoned"], 1, 8
    ),
    "while the restart command runs": Case(
        "", "restarting", "done", ["reconciling", "verifying", "verifying", "done"], 2, 16,
        restarting=True,
    ),
    # vLLM keeps its port and /health while it drains, and the restart command outlives the
    # governor: the next one must wait for the new process, not abandon a restart under way.
    "while the old server drains": Case(
        "", "restarting", "done", ["reconciling", "verifying", "verifying", "done"], 2, 16,
        draining=True,
    ),
    # The same during the revert: its restart drains the failed server; the next governor
    # must wait for it, not issue a second revert restart (which failed with exit 7 before).
    "while the revert drains": Case(
        "", "revert_restarting", "reverted",
        ["reconciling", "restored", "revert_ready", "revert_verifying", "revert_verifying",
         "reverted"],
        3, 8, draining=True, reverting=True,
    ),
    "during the verification": Case(
        "", "verifying", "done", ["reconciling", "verifying", "verifying", "done"], 2, 16,
        verify_window_s=4.0,
    ),
    # Every other step of the revert (its restart under way is test_retune.py's case). Before
    # the revert's restart, the failed process still serves: the next governor restarts once.
    "after the revert began, before its write": Case(
        "reverting:60", "reverting", "reverted", REVERT_AGAIN, 3, 8, verify_window_s=4.0,
        reverting=True,
    ),
    "after the revert's write, before its restart": Case(
        "revert_written:60", "revert_written", "reverted", REVERT_AGAIN, 3, 8,
        verify_window_s=4.0, reverting=True,
    ),
    # After it, the process on the last-known-good files serves: verified, never restarted.
    "after the revert's restart": Case(
        "revert_restarted:60", "revert_restarted", "reverted", REVERIFY, 3, 8,
        verify_window_s=4.0, reverting=True,
    ),
    "after the reverted server is ready": Case(
        "revert_ready:60", "revert_ready", "reverted", REVERIFY, 3, 8, verify_window_s=4.0,
        reverting=True,
    ),
    "during the revert's verification": Case(
        "", "revert_verifying", "reverted", REVERIFY, 3, 8, verify_window_s=4.0,
        reverting=True,
    ),
}  # fmt: skip


def trigger(directory: Path, sim: SupervisedSim, case: Case) -> Callable[[], Any]:
    reached = step_reached(directory, case.kill_when)

    def check() -> Any:
        entry = reached()
        if entry is None or (case.restarting and sim.spawns() < 2):
            return None
        drains = 2 if case.reverting else 1  # the revert's restart drains the second process
        if case.draining and sim.sim_log().count("draining for up to") < drains:
            return None
        return entry

    return check


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_governor_killed_mid_change_is_reconciled_by_the_next(
    short_tmp: Path, case: Case
) -> None:
    drain = "shutdown-timeout: 10\n" if case.draining else ""
    if case.reverting:
        drain += f"num-gpu-blocks-override: {SMALL_POOL_BLOCKS}\n"
    # The change to 32 sequences preempts only while a load fills the small KV cache.
    load = SATURATING_WORKLOAD if case.draining or case.reverting else None
    with supervised_sim(short_tmp, f"max-num-seqs: 8\n{drain}", load=load) as sim:
        # Under the saturating load a restart is worse for TTFT whatever the change: this case
        # is about the restart, not the verdict.
        # A revert case is about the revert's steps: preemptions, not TTFT, fail the change.
        ratio = 1000.0 if case.draining or case.reverting else 1.5
        config = governor_config(
            short_tmp,
            sim,
            verify_window_s=case.verify_window_s,
            max_ttft_ratio=ratio,
            max_seqs=32 if case.reverting else 16,
        )
        write_policy(short_tmp, "running >= 0.0", factor=4.0 if case.reverting else 2.0)
        hold = {"VLLM_GOVERNOR_TEST_HOLD_AFTER_STEP": case.hold} if case.hold else {}
        kill_when(config, trigger(short_tmp, sim, case), f"step {case.kill_when}", env=hold)
        # The operator may shorten the window meanwhile: the next governor verifies afresh.
        config.write_text(
            config.read_text().replace(
                f"verify_window_s = {case.verify_window_s}", "verify_window_s = 1.5"
            )
        )
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            entry = eventually(finished(short_tmp), "the reconciliation", daemon)
        assert entry["state"] == case.state, entry
        if case.draining:
            drained = 3 if case.reverting else 2
            assert sim.spawns() == drained, "the kill landed while the old server drained"
        assert entry["steps"][-len(case.last_steps) :] == case.last_steps, entry["steps"]
        assert f"max-num-seqs: {case.seqs}\n" in sim.vllm_yaml.read_text()
        sim.wait_ready(10)
        assert sim.spawns() == case.spawns, "no restart twice for one decision"
        assert len(journal(short_tmp)) == 1, "one outcome"


# The restart command: the service manager's the first time, a refusal (exit 7, the server left
# alone) every time after.
REFUSED_AFTER_ONE = """\
import pathlib, subprocess, sys
calls = pathlib.Path(sys.argv[1])
done = int(calls.read_text()) if calls.exists() else 0
calls.write_text(str(done + 1))
if done:
    print("sim: ERROR (refused)")
    sys.exit(7)
sys.exit(subprocess.call(sys.argv[2:]))
"""


def test_a_revert_restart_that_fails_in_the_reconcile_is_journaled_as_failed_at_once(
    short_tmp: Path,
) -> None:
    """The next governor's revert restart exits 7: said in the journal, not waited out."""
    small_pool = f"max-num-seqs: 8\nnum-gpu-blocks-override: {SMALL_POOL_BLOCKS}\n"
    with supervised_sim(short_tmp, small_pool, load=SATURATING_WORKLOAD) as sim:
        config = governor_config(
            short_tmp, sim, verify_window_s=4.0, max_ttft_ratio=1000.0, max_seqs=32
        )
        # The journaled plan carries the restart command the reconcile runs.
        script = short_tmp / "refused_after_one.py"
        script.write_text(REFUSED_AFTER_ONE)
        restart = json.dumps(sim.restart_command())
        once = [sys.executable, str(script), str(short_tmp / "calls"), *sim.restart_command()]
        config.write_text(config.read_text().replace(restart, json.dumps(once)))
        write_policy(short_tmp, "running >= 0.0", factor=4.0)
        hold = {"VLLM_GOVERNOR_TEST_HOLD_AFTER_STEP": "reverting:60"}
        kill_when(config, step_reached(short_tmp, "reverting"), "the revert", env=hold)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            entry = eventually(finished(short_tmp), "the reconciliation", daemon)
    assert entry["state"] == "failed", entry
    assert entry["steps"][-5:] == [
        "reconciling", "restored", "revert_restarting", "revert_restarted", "failed"
    ], entry["steps"]  # fmt: skip
    outcome = entry["outcome"]
    assert "the revert's restart command failed (exit 7: sim: ERROR (refused))" in outcome
    assert "the process that failed the change still serves" in outcome, outcome
    # One look at the server, not the 20 s ready wait that a restart under way would get.
    assert entry["timings"]["revert_ready"] < 10.0, entry["timings"]
    assert "max-num-seqs: 8\n" in sim.vllm_yaml.read_text(), "the last-known-good files"
    assert sim.spawns() == 2, "the change's restart only: the revert's was refused"
    assert len(journal(short_tmp)) == 1
