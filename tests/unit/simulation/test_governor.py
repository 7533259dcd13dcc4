"""The governor in virtual time: the real policies, approvals answered after a delay."""

from __future__ import annotations

import shutil
from pathlib import Path

from daemon.app.simulation.events import APPROVED, PROPOSED, REJECTED, RESTART
from daemon.app.simulation.runs import Job, execute
from tests.unit.simulation.conftest import POLICIES

PROFILE = "llama-3.1-8b-h100-tp1"


def _kv_thrash_only(tmp_path: Path) -> Path:
    # A fixed-step cut on kv-thrash's condition: these tests follow a proposal through the
    # approvals, and the pack's own kv-thrash asks a what-if for its value instead.
    directory = tmp_path / "policies"
    directory.mkdir()
    shutil.copy(POLICIES / "tests" / "fixtures" / "seqs-cut-step.yaml", directory)
    return directory


def test_kv_thrash_proposes_and_the_approved_cut_restarts_after_the_delay(
    thrash: Path, tmp_path: Path
) -> None:
    job = Job(
        "governor-restart-only",
        PROFILE,
        None,
        thrash,
        1,
        (_kv_thrash_only(tmp_path),),
        approval_delay_s=30.0,
    )
    result = execute(job)
    kinds = [(e.kind, e.policy) for e in result.events]
    cut = "seqs-cut-step"
    assert kinds[:3] == [(PROPOSED, cut), (APPROVED, cut), (RESTART, cut)]
    proposed, approved, restart = result.events[:3]
    assert approved.at - proposed.at == 30.0
    assert restart.at == approved.at
    assert restart.changes["max_num_seqs"] == (1024.0, 768.0)
    assert result.restarts == 1
    assert result.downtime_s > 0


def test_a_rejected_proposal_changes_nothing(thrash: Path, tmp_path: Path) -> None:
    job = Job(
        "governor-restart-only",
        PROFILE,
        None,
        thrash,
        1,
        (_kv_thrash_only(tmp_path),),
        approval_delay_s=30.0,
        approval_answer="reject",
    )
    result = execute(job)
    assert [e.kind for e in result.events][:2] == [PROPOSED, REJECTED]
    assert RESTART not in [e.kind for e in result.events]
    assert result.restarts == 0


def test_the_two_speed_governor_caps_the_gate_in_a_burst(tiny: Path) -> None:
    result = execute(Job("governor", PROFILE, None, tiny, 1, (POLICIES,)))
    caps = [e for e in result.events if e.kind == "cap" and e.policy == "admission-cap"]
    assert caps
    assert min(e.changes["gate_cap"][1] for e in caps) < 1024
    assert result.restarts == 0
