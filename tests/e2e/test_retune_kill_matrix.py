"""The governor killed (SIGKILL) at each step of a change: its next start finishes or reverts.

Each case ends with one healthy server on a journaled config, one outcome in the journal, and
no restart done twice. The kill lands where the journal shows the step: naturally for a restart
(supervisorctl takes seconds) and a verification (its window), and through the actuator's test
hook (a pause after a journaled step) for the instants between writing and restarting. The
revert case is in ``test_retune.py``.
"""

from __future__ import annotations

import signal
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
    load = SATURATING_WORKLOAD if case.draining else None
    with supervised_sim(short_tmp, f"max-num-seqs: 8\n{drain}", load=load) as sim:
        # Under the saturating load a restart is worse for TTFT whatever the change: this case
        # is about the restart, not the verdict.
        ratio = 1000.0 if case.draining else 1.5
        config = governor_config(
            short_tmp,
            sim,
            verify_window_s=case.verify_window_s,
            max_ttft_ratio=ratio,
            max_seqs=32 if case.reverting else 16,
        )
        write_policy(short_tmp, "running >= 0.0", factor=4.0 if case.reverting else 2.0)
        hold = {"VLLM_GOVERNOR_TEST_HOLD_AFTER_STEP": case.hold} if case.hold else {}
        with running_daemon(config, env=hold) as daemon:
            daemon.wait_for("READY=1")
            eventually(trigger(short_tmp, sim, case), f"step {case.kill_when}", daemon)
            daemon.process.send_signal(signal.SIGKILL)
            daemon.process.wait(timeout=10)
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
