"""An approved proposal whose governor stopped before its outcome was known, after a restart.

The first governor is stopped while the approved change is running (the recording actuator is
slow on purpose), so the proposal is left ``approved``; what the actuator had journaled by then
is written into the same state database's journal, as the real actuator writes it ahead of
every change. The second governor must take the outcome from the journal, wait while the
entry is still open (the actuation runner is reconciling it), and otherwise mark it failed;
never run the change a second time.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from daemon.approvals.clicks import Action, Click
from daemon.core.actuation import DONE, OPEN, REVERTED, JournalState
from tests.support.slack_double import SlackDouble
from tests.support.slack_double.approvals_rig import (
    ALICE,
    RecordingActuator,
    Rig,
    approvals_rig,
    intent,
)
from tests.support.slack_double.messages import CHANNEL, header
from tests.support.slack_double.store import Message
from tests.support.tasks import eventually

pytestmark = pytest.mark.asyncio


async def approve_and_stop(
    state_dir: Path, double: SlackDouble, journaled: JournalState | None
) -> tuple[str, Message]:
    """Approve in a first governor and stop it mid-change, after the actuator journaled."""
    actuator = RecordingActuator(state_dir, delay_s=3600.0)  # still running when stopped
    async with approvals_rig(state_dir, double, actuator=actuator) as rig:
        rig.plane.propose(intent())
        await eventually(lambda: bool(double.store.in_channel(CHANNEL)), "the proposal posted")
        [listed] = rig.plane.listing()
        answer = rig.plane.judge(cli_click(rig, listed["id"], listed["hash"]))
        assert answer.accepted, answer
        await eventually(lambda: "Approved" in header(first_message(double)), "approval shown")
        if journaled is not None:
            journal = rig.actuation.journal
            if journaled is OPEN:
                journal.begin("main", "more-seqs", {}, {})
            else:
                journal.record(
                    "main", "more-seqs", state=journaled, outcome=f"journaled {journaled}",
                    plan={}, timings={},
                )  # fmt: skip
        assert rig.plane.listing()[0]["state"] == "approved"
    assert actuator.applied == [], "the first governor stopped before the change finished"
    return listed["id"], first_message(double)


def cli_click(rig: Rig, proposal_id: str, change_hash: str) -> Click:
    return Click(
        "cli:1", ALICE, frozenset(), Action.APPROVE, proposal_id, change_hash, rig.plane.now(),
        via="cli",
    )  # fmt: skip


def first_message(double: SlackDouble) -> Message:
    return next(m for m in double.store.in_channel(CHANNEL) if m.thread_ts is None)


@pytest.mark.parametrize(
    ("journaled", "state", "shown"),
    [(DONE, "verified", "verified"), (REVERTED, "reverted", "reverted")],
)
async def test_the_outcome_is_taken_from_the_journal(
    short_tmp: Path, double: SlackDouble, journaled: JournalState, state: str, shown: str
) -> None:
    proposal_id, message = await approve_and_stop(short_tmp, double, journaled)
    async with approvals_rig(short_tmp, double) as again:
        await eventually(lambda: shown in header(message).lower(), "the outcome shown")
        await eventually(lambda: bool(double.store.replies(CHANNEL, message.ts)), "a reply")
        listed = again.plane.store.get(proposal_id)
    assert listed is not None
    assert listed.record.state.value == state
    assert listed.record.reason == f"journaled {journaled}"
    assert again.actuator.applied == [], "a restart never runs an approved change twice"
    assert len([m for m in double.store.in_channel(CHANNEL) if m.thread_ts is None]) == 1


async def test_a_change_that_never_ran_is_marked_failed(
    short_tmp: Path, double: SlackDouble
) -> None:
    proposal_id, message = await approve_and_stop(short_tmp, double, None)
    async with approvals_rig(short_tmp, double) as again:
        await eventually(lambda: "failed" in header(message).lower(), "the failure shown")
        stored = again.plane.store.get(proposal_id)
    assert stored is not None
    assert stored.record.state.value == "failed"
    assert "restarted before the change ran; propose it again" in stored.record.reason
    assert again.actuator.applied == []


async def test_an_open_journal_entry_is_waited_for_not_guessed(
    short_tmp: Path, double: SlackDouble
) -> None:
    proposal_id, message = await approve_and_stop(short_tmp, double, OPEN)
    async with approvals_rig(short_tmp, double) as again:
        # The first governor died mid-change; reconciling closes its entry. Until then the
        # proposal stays approved (many sweeps pass meanwhile).
        sweeps = again.config.approvals.sweep_interval_s * 5
        await eventually(lambda: bool(double.socket.open_connections), "the new governor up")
        await still_approved_after(again, proposal_id, sweeps)
        journal = again.actuation.journal
        entry = journal.open_entry("main")
        assert entry is not None
        journal.finish(entry.id, REVERTED, "rolled back at start", {})
        await eventually(lambda: "reverted" in header(message).lower(), "the outcome shown")
        stored = again.plane.store.get(proposal_id)
    assert stored is not None
    assert stored.record.state.value == "reverted"
    assert stored.record.reason == "rolled back at start"
    assert again.actuator.applied == []


async def still_approved_after(rig: Rig, proposal_id: str, wait_s: float) -> None:
    """The proposal is still approved after ``wait_s`` of sweeps."""
    await asyncio.sleep(wait_s)
    stored = rig.plane.store.get(proposal_id)
    assert stored is not None
    assert stored.record.state.value == "approved", stored.record
