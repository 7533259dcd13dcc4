"""A member's answer to a rollout's step: act once, or find the step already taken (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from daemon.core.actuation import ABANDONED, DONE, FAILED, REFUSED, REVERTED, JournalState
from daemon.fleet.member_resume import (
    Answer,
    Attempt,
    FinishedChange,
    Resumption,
    Standing,
    resume,
)
from daemon.fleet.rollout_state import RolloutMoveError, Step

T0 = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)
NEW = {"max_num_seqs": 48.0}
OLD = {"max_num_seqs": 64.0}
APPLYING = Attempt("h1/main", Step.APPLY, NEW, OLD, T0)


def _finished(state: JournalState, outcome: str) -> FinishedChange:
    return FinishedChange(state, outcome)


@pytest.mark.parametrize(
    ("asked", "attempt", "standing", "expected"),
    [
        pytest.param(
            Step.APPLY,
            APPLYING,
            Standing(NEW, open_change=True),
            Resumption(Answer.WAIT, "a change of the server is open in the journal"),
            id="a change open (the reconcile at work): wait",
        ),
        pytest.param(
            Step.APPLY,
            APPLYING,
            Standing(NEW, finished=_finished(DONE, "applied and verified")),
            Resumption(
                Answer.DONE, "done: applied and verified (before the governor restarted)", OLD
            ),
            id="the attempt's change verified: done, with the values before",
        ),
        pytest.param(
            Step.APPLY,
            APPLYING,
            Standing(OLD, finished=_finished(REVERTED, "reverted: not ready")),
            Resumption(
                Answer.FAILED, "reverted: reverted: not ready (before the governor restarted)", OLD
            ),
            id="the attempt's change reverted: failed, never applied again",
        ),
        pytest.param(
            Step.APPLY,
            APPLYING,
            Standing(OLD, finished=_finished(REFUSED, "refused (frozen): incident")),
            Resumption(
                Answer.FAILED,
                "refused: refused (frozen): incident (before the governor restarted)",
                OLD,
            ),
            id="the attempt's change refused: failed, as it would have reported",
        ),
        pytest.param(
            Step.APPLY,
            APPLYING,
            Standing(OLD, finished=_finished(FAILED, "the revert failed")),
            Resumption(
                Answer.FAILED, "failed: the revert failed (before the governor restarted)", OLD
            ),
            id="the attempt's change failed: failed",
        ),
        pytest.param(
            Step.APPLY,
            APPLYING,
            Standing(OLD, finished=_finished(ABANDONED, "files restored, nothing restarted")),
            Resumption(Answer.ACT),
            id="abandoned before any restart: act (the first restart)",
        ),
        pytest.param(
            Step.APPLY,
            APPLYING,
            Standing(NEW),
            Resumption(Answer.DONE, "already in force (the files say so): nothing restarted", OLD),
            id="begun, nothing journaled, the files say so: done, the attempt's values before",
        ),
        pytest.param(
            Step.APPLY,
            None,
            Standing(NEW),
            Resumption(Answer.DONE, "already in force (the files say so): nothing restarted", NEW),
            id="never begun, already in force: done without a restart",
        ),
        pytest.param(
            Step.APPLY, None, Standing(OLD), Resumption(Answer.ACT), id="never begun: act"
        ),
        pytest.param(
            Step.APPLY,
            APPLYING,
            Standing(OLD),
            Resumption(Answer.ACT),
            id="begun, nothing journaled, the files as before: act (it died before the queue)",
        ),
        pytest.param(
            Step.REVERT,
            APPLYING,
            Standing(NEW, finished=_finished(DONE, "applied and verified")),
            Resumption(Answer.ACT),
            id="a revert asked after the apply: the apply's attempt is not the revert's",
        ),
        pytest.param(
            Step.APPLY,
            None,
            Standing({}),
            Resumption(Answer.ACT),
            id="knobs unknown: act (the actuator says why not)",
        ),
    ],
)
def test_resume(
    asked: Step, attempt: Attempt | None, standing: Standing, expected: Resumption
) -> None:
    values = NEW if asked is Step.APPLY else OLD
    assert resume(asked, values, attempt, standing) == expected


def test_a_revert_found_made_is_done() -> None:
    reverting = Attempt("h1/main", Step.REVERT, OLD, NEW, T0)
    found = resume(Step.REVERT, OLD, reverting, Standing(OLD))
    assert found.answer is Answer.DONE


def test_an_attempt_is_stored_as_json_and_read_back() -> None:
    assert Attempt.from_json(APPLYING.to_json()) == APPLYING


@pytest.mark.parametrize("raw", [b"{}", b"not json", b'{"member": "h1/main", "asked": "nope"}'])
def test_an_attempt_that_cannot_be_read_is_an_error(raw: bytes) -> None:
    with pytest.raises(RolloutMoveError, match="a member's attempt that cannot be read"):
        Attempt.from_json(raw)
