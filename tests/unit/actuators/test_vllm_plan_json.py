"""A journaled change plan reads back as the typed plan it was: the revert path's input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actuators.vllm.atomic_files import FileSnapshot
from actuators.vllm.plan import PLAN_VERSION, ChangePlan, FileChange
from actuators.vllm.steps import Step
from daemon.api import ActuationError


def a_plan(tmp_path: Path) -> ChangePlan:
    yaml = FileChange(
        FileSnapshot(tmp_path / "vllm.yaml", True, "max-num-seqs: 8\n", 0o640),
        "max-num-seqs: 16\n",
    )
    env = FileChange(FileSnapshot(tmp_path / "vllm.env", False, "", 0o600), "VLLM_X=1\n")
    return ChangePlan(
        target="main",
        policy="more-seqs",
        registry="0.33",
        knobs={"max_num_seqs": (8.0, 16.0), "log_level": (None, 30.0)},
        files=(yaml, env),
        restart=("systemctl", "restart", "vllm@main.service"),
        reason="waiting > 2",
        evidence={"waiting": 5.0},
        operation=None,
    )


def test_a_plan_survives_the_journal_whole(tmp_path: Path) -> None:
    plan = a_plan(tmp_path)
    # Through JSON text, as the SQLite journal keeps it.
    stored = json.loads(json.dumps(plan.as_json()))
    assert stored["version"] == PLAN_VERSION
    assert ChangePlan.from_json(stored) == plan
    assert plan.changes == {"max_num_seqs": 16.0, "log_level": 30.0}


def test_a_plan_journaled_before_versions_reads_as_version_one(tmp_path: Path) -> None:
    stored = a_plan(tmp_path).as_json()
    del stored["version"]
    assert ChangePlan.from_json(stored) == a_plan(tmp_path)


def test_a_plan_this_governor_cannot_read_is_refused_not_guessed(tmp_path: Path) -> None:
    newer = a_plan(tmp_path).as_json() | {"version": PLAN_VERSION + 1}
    with pytest.raises(ActuationError, match="newer than this governor's"):
        ChangePlan.from_json(newer)
    # A refused change journals its request, not a plan: it is never reconciled as one.
    with pytest.raises(ActuationError, match="no readable change plan"):
        ChangePlan.from_json({"request": {"target": "main"}})


def test_journal_steps_are_one_enumeration_of_the_strings_the_journal_holds() -> None:
    assert Step("revert_restarting") is Step.REVERT_RESTARTING
    assert f"{Step.PLANNED}" == "planned"
    assert len({step.value for step in Step}) == len(Step)
