"""The log-level actuator journals a typed, versioned plan and reconciles only from one it can read.

Against the Envoy admin double and the real journal: a plan from a newer governor, or a body
that is no log-level plan, is refused with an ActuationError and the entry stays open for the
governor that can read it, instead of being finished from a misread plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actuators.http_log_level.actuator import HttpLogLevelActuator
from actuators.http_log_level.plan import PLAN_VERSION, LevelPlan
from daemon.api import ActuationError, ChangeRequest, HttpLogLevelTarget, SystemClock
from daemon.engine.storage.journal_store import SqliteJournal
from tests.support.envoy_admin import EnvoyAdmin

pytestmark = pytest.mark.asyncio

LEVELS = {"DEBUG": "debug", "INFO": "info", "WARNING": "warning", "ERROR": "error"}


def target_of(admin: EnvoyAdmin) -> HttpLogLevelTarget:
    return HttpLogLevelTarget(
        name="envoy", url=f"{admin.url}/logging?level={{level}}", levels=LEVELS
    )


async def test_a_journaled_plan_reads_back_as_it_was_made(tmp_path: Path) -> None:
    with EnvoyAdmin() as admin:
        target = target_of(admin)
        journal = SqliteJournal(tmp_path / "state.sqlite3", SystemClock())
        actuator = HttpLogLevelActuator(journal, SystemClock(), tmp_path)
        await actuator.refresh(target)
        request = ChangeRequest("envoy", "quiet", {"log_level": 40.0}, {"log_level": 20.0})
        result = await actuator.apply(target, request)
        assert result.state == "done", result.outcome
        [entry] = journal.recent(1)
        journal.close()
    plan = LevelPlan.from_json(entry.plan)
    assert (plan.old, plan.new, plan.old_word, plan.new_word) == (20.0, 40.0, "info", "error")
    assert plan.as_json() == entry.plan
    assert entry.plan["version"] == PLAN_VERSION
    assert entry.plan["knobs"] == {"log_level": [20.0, 40.0]}, "the key every reader knows"


@pytest.mark.parametrize(
    ("plan", "why"),
    [
        (
            {
                "version": PLAN_VERSION + 1,
                "kind": "http_log_level",
                "knobs": {"log_level": [20, 40]},
            },
            "newer than this governor",
        ),
        ({"kind": "http_log_level", "knobs": {"max_num_seqs": [8, 16]}}, "no log-level plan"),
        ({"kind": "vllm_restart", "knobs": {"log_level": [20, 40]}}, "of kind 'vllm_restart'"),
    ],
)
async def test_a_plan_it_cannot_read_is_refused_and_the_entry_stays_open(
    tmp_path: Path, plan: dict[str, Any], why: str
) -> None:
    with EnvoyAdmin() as admin:
        target = target_of(admin)
        admin.state.level = "debug"  # neither level of the plan: a misread would revert
        journal = SqliteJournal(tmp_path / "state.sqlite3", SystemClock())
        entry = journal.begin("envoy", "quiet", plan, {})  # the governor died after this
        actuator = HttpLogLevelActuator(journal, SystemClock(), tmp_path)
        with pytest.raises(ActuationError, match=why):
            await actuator.reconcile(target)
        still = journal.open_entry("envoy")
        assert still is not None
        assert still.id == entry.id
        assert admin.state.level == "debug", "nothing was sent"
        journal.close()
