"""The approval flow end to end on the engine: the real slack-sdk clients, the Slack double,
the SQLite store, the actuation runner; clicks over Socket Mode and the CLI path.

Every refusal test also checks that nothing was applied: zero accepted bad clicks.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from daemon.approvals.clicks import Action, Click
from tests.support.slack_double import Drop, RateLimited, ServerError, SlackDouble, block_actions
from tests.support.slack_double.approvals_rig import ALICE, BOB, MALLORY, approvals_rig, intent
from tests.support.slack_double.messages import (
    CHANNEL,
    ephemerals_to,
    has_buttons,
    header,
    top_messages,
)
from tests.support.slack_double.store import Message
from tests.support.tasks import eventually

pytestmark = pytest.mark.asyncio


async def posted(double: SlackDouble) -> Message:
    """The one proposal message, once it is posted and Socket Mode is connected."""
    await eventually(lambda: len(top_messages(double)) == 1, "the proposal's message")
    await double.socket.wait_connections(1)
    await eventually(lambda: bool(double.socket.open_connections), "a Socket Mode connection")
    return top_messages(double)[0]


async def press(double: SlackDouble, message: Message, user: str, action: str) -> None:
    """Press a button of the message as first posted (a client may still show that one)."""
    shown = message.edits[0][1] if message.edits else message.blocks
    as_posted = Message(message.channel, message.ts, message.text, shown)
    serial = len(double.socket.envelopes) + 1
    payload = block_actions(
        as_posted, user, f"approval.{action}", action_ts=f"1700002000.{serial:06d}"
    )
    envelope = await double.socket.push(payload)
    await double.socket.wait_ack(envelope.envelope_id)


async def test_approve_applies_the_change_and_edits_the_message(
    short_tmp: Path, double: SlackDouble
) -> None:
    async with approvals_rig(short_tmp, double) as rig:
        rig.plane.propose(intent())
        message = await posted(double)
        assert header(message).startswith(":raised_hand: Approval needed: max_num_seqs 8 → 16")
        assert has_buttons(message)
        await press(double, message, ALICE, "approve")
        await eventually(lambda: "verified" in header(message), "the message to show the outcome")
        await eventually(lambda: bool(double.store.replies(CHANNEL, message.ts)), "a reply")
    assert [r.changes for r in rig.actuator.applied] == [{"max_num_seqs": 16.0}]
    assert rig.actuator.applied[0].risk == "approval"
    assert not has_buttons(message)
    assert "<@U0ALICE>" in str(message.blocks)
    [reply] = double.store.replies(CHANNEL, message.ts)
    assert "Applied and verified" in reply.text
    assert double.socket.late() == []
    assert len(double.calls_to("chat.postMessage")) == 2  # the proposal and its one reply


async def test_reject_changes_nothing(short_tmp: Path, double: SlackDouble) -> None:
    async with approvals_rig(short_tmp, double) as rig:
        rig.plane.propose(intent())
        message = await posted(double)
        await press(double, message, BOB, "reject")
        await eventually(lambda: "Rejected" in header(message), "the rejection shown")
        await press(double, message, ALICE, "approve")
        await eventually(lambda: bool(ephemerals_to(double, ALICE)), "the answer to Alice")
        [listed] = rig.plane.listing()
    assert rig.actuator.applied == []
    assert ephemerals_to(double, ALICE)[0].startswith(f"Refused: already rejected by {BOB} at ")
    assert listed["state"] == "rejected"


async def test_a_proposal_expires_and_a_late_click_is_refused(
    short_tmp: Path, double: SlackDouble
) -> None:
    async with approvals_rig(short_tmp, double, expiry_s=1.5) as rig:
        rig.plane.propose(intent())
        message = await posted(double)
        await eventually(lambda: "Expired" in header(message), "the expiry shown")
        await press(double, message, ALICE, "approve")
        await eventually(lambda: bool(ephemerals_to(double, ALICE)), "the answer")
    assert rig.actuator.applied == []
    assert ephemerals_to(double, ALICE)[0].startswith("Refused: already expired")
    assert not has_buttons(message)


async def test_an_unauthorised_user_is_refused(short_tmp: Path, double: SlackDouble) -> None:
    async with approvals_rig(short_tmp, double) as rig:
        rig.plane.propose(intent())
        message = await posted(double)
        await press(double, message, MALLORY, "approve")
        await eventually(lambda: bool(ephemerals_to(double, MALLORY)), "the refusal")
        [listed] = rig.plane.listing()
    assert ephemerals_to(double, MALLORY) == ["Refused: you may not decide restart proposals"]
    assert listed["state"] == "pending"
    assert rig.actuator.applied == []
    assert has_buttons(message)


async def test_a_user_group_member_may_approve(short_tmp: Path, double: SlackDouble) -> None:
    double.store.groups["S0OPS"] = {MALLORY}
    async with approvals_rig(short_tmp, double, groups=("S0OPS",)) as rig:
        rig.plane.propose(intent())
        message = await posted(double)
        await press(double, message, MALLORY, "approve")
        await eventually(lambda: bool(rig.actuator.applied), "the change applied")
    assert double.calls_to("usergroups.users.list")[0].args["usergroup"] == "S0OPS"


async def test_a_double_click_and_a_redelivery_apply_once(
    short_tmp: Path, double: SlackDouble
) -> None:
    async with approvals_rig(short_tmp, double) as rig:
        rig.actuator.delay_s = 0.3
        rig.plane.propose(intent())
        message = await posted(double)
        first = await double.press(CHANNEL, message.ts, ALICE, "approval.approve")
        again = await double.socket.redeliver(first.envelope_id)  # Slack's retry: same click
        await double.press(CHANNEL, message.ts, ALICE, "approval.approve")  # a second click
        await double.press(CHANNEL, message.ts, BOB, "approval.approve")
        await double.socket.wait_ack(again.envelope_id)
        await eventually(lambda: "verified" in header(message), "the outcome")
        await eventually(lambda: len(double.store.ephemerals) == 3, "three refusals")
        clicks = rig.plane.store.clicks(rig.plane.listing()[0]["id"])
    assert len(rig.actuator.applied) == 1
    assert sorted(e.text.split(":")[0] for e in double.store.ephemerals) == ["Refused"] * 3
    assert [c["accepted"] for c in clicks] == [True, False, False, False]


async def test_a_stale_proposal_is_refused_with_the_reason(
    short_tmp: Path, double: SlackDouble
) -> None:
    async with approvals_rig(short_tmp, double) as rig:
        rig.plane.propose(intent())
        message = await posted(double)
        rig.actuator.knobs["max_num_seqs"] = 12.0  # someone changed the server meanwhile
        await press(double, message, ALICE, "approve")
        await eventually(lambda: "out of date" in header(message), "the refusal shown")
        await eventually(lambda: bool(ephemerals_to(double, ALICE)), "the answer")
    assert rig.actuator.applied == []
    assert "max_num_seqs is now 12; the proposal assumed 8" in str(message.blocks)
    assert ephemerals_to(double, ALICE) == [
        "Refused: max_num_seqs is now 12; the proposal assumed 8"
    ]


async def test_a_condition_gone_or_a_freeze_refuses_the_click(
    short_tmp: Path, double: SlackDouble
) -> None:
    async with approvals_rig(short_tmp, double) as rig:
        rig.plane.propose(intent())
        message = await posted(double)
        rig.plane.freeze("main", 600, "incident 42", by="unix:ops")
        await press(double, message, ALICE, "approve")
        await eventually(lambda: len(ephemerals_to(double, ALICE)) == 1, "the freeze refusal")
        rig.plane.unfreeze("main", by="unix:ops")
        rig.lens.holds = False
        await press(double, message, ALICE, "approve")
        await eventually(lambda: "No longer needed" in header(message), "the withdrawal")
    assert rig.actuator.applied == []
    assert ephemerals_to(double, ALICE)[0].startswith("Refused: a freeze is in force: frozen by")
    assert "incident 42" in ephemerals_to(double, ALICE)[0]


async def test_two_person_rule_needs_two_different_approvers(
    short_tmp: Path, double: SlackDouble
) -> None:
    async with approvals_rig(short_tmp, double, two_person=True) as rig:
        rig.plane.propose(intent())
        message = await posted(double)
        await press(double, message, ALICE, "approve")
        await eventually(lambda: "so far: <@U0ALICE>" in str(message.blocks), "one of two")
        await press(double, message, ALICE, "approve")
        await eventually(lambda: len(ephemerals_to(double, ALICE)) == 2, "the same-user refusal")
        assert rig.actuator.applied == []
        await press(double, message, BOB, "approve")
        await eventually(lambda: "verified" in header(message), "the outcome")
        [listed] = rig.plane.listing()
    assert ephemerals_to(double, ALICE) == [
        "Noted: approval 1 of 2: waiting for another approver",
        "Refused: you already approved it: a second, different approver is needed",
    ]
    assert len(rig.actuator.applied) == 1
    assert [v["user"] for v in listed["votes"]] == [ALICE, BOB]


async def test_a_governor_restart_keeps_the_proposal_decidable_and_posts_nothing_twice(
    short_tmp: Path, double: SlackDouble
) -> None:
    async with approvals_rig(short_tmp, double) as rig:
        rig.plane.propose(intent())
        message = await posted(double)
    async with approvals_rig(short_tmp, double, actuator=rig.actuator) as again:
        await double.socket.wait_connections(2)
        await eventually(lambda: len(double.socket.open_connections) == 1, "the new connection")
        await press(double, message, ALICE, "approve")
        await eventually(lambda: "verified" in header(message), "the outcome")
    assert len(top_messages(double)) == 1
    assert len(again.actuator.applied) == 1


async def test_a_post_whose_answer_was_lost_is_found_not_repeated(
    short_tmp: Path, double: SlackDouble
) -> None:
    # Slack posts the message but the answer never arrives: the governor cannot know; it
    # looks for its message by metadata before posting again, and finds it.
    double.fault("chat.postMessage", Drop(after_processing=True))
    async with approvals_rig(short_tmp, double) as rig:
        rig.plane.propose(intent())
        await eventually(lambda: bool(rig.plane.listing()[0]["slack_message"]), "the ref")
        await eventually(lambda: bool(double.calls_to("chat.update")), "the found message edited")
        ts = rig.plane.listing()[0]["slack_message"]["ts"]
    assert [m.ts for m in top_messages(double)] == [ts]
    assert len(double.calls_to("chat.postMessage")) == 1
    assert double.calls_to("conversations.history")


async def test_slack_429_and_500_are_retried_without_duplicates(
    short_tmp: Path, double: SlackDouble
) -> None:
    double.fault("chat.postMessage", RateLimited(retry_after_s=1))
    double.fault("chat.postMessage", ServerError(500))
    double.fault("chat.update", ServerError(503), times=2)
    async with approvals_rig(short_tmp, double) as rig:
        rig.plane.propose(intent())
        message = await posted(double)
        await press(double, message, ALICE, "approve")
        await eventually(lambda: "verified" in header(message), "the outcome", timeout_s=30)
    faults = [c.fault for c in double.calls_to("chat.postMessage")]
    assert faults[:3] == ["RateLimited", "ServerError", None]
    # After the 500 (which may have posted) the channel was searched before posting again.
    assert double.calls_to("conversations.history")
    assert len(top_messages(double)) == 1
    assert [c.fault for c in double.calls_to("chat.update")][:2] == ["ServerError"] * 2
    assert len(rig.actuator.applied) == 1


async def test_slack_unreachable_leaves_the_cli_and_the_daemon_working(short_tmp: Path) -> None:
    async with SlackDouble() as gone:
        url = gone.base_url  # nothing listens there once the double has stopped
    async with approvals_rig(short_tmp, url, cli_users=("unix:ops",)) as rig:
        rig.plane.propose(intent())
        [listed] = rig.plane.listing()
        await asyncio.sleep(1.0)  # the messenger has failed and backs off by now
        click = Click(
            "cli:1", "unix:ops", frozenset(), Action.APPROVE, listed["id"], listed["hash"],
            rig.plane.now(), via="cli",
        )  # fmt: skip
        answer = rig.plane.judge(click)
        assert answer.accepted, answer
        await eventually(lambda: rig.plane.listing()[0]["state"] == "verified", "verified")
        assert rig.plane.listing()[0]["slack_message"] is None
    assert len(rig.actuator.applied) == 1
