"""The approval sweeper withdraws a proposal whose condition stopped holding, and ``notify()``.

The plane runs with its real Slack tasks against the Slack double (tests/support/slack_double);
only the policies' answer (the lens) is set by the test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.slack_double import RateLimited, ServerError, SlackDouble
from tests.support.slack_double.approvals_rig import approvals_rig, intent
from tests.support.slack_double.messages import CHANNEL, has_buttons, header, top_messages
from tests.support.tasks import eventually

pytestmark = pytest.mark.asyncio


async def test_the_sweeper_withdraws_a_proposal_whose_condition_stopped_holding(
    short_tmp: Path, double: SlackDouble
) -> None:
    async with approvals_rig(short_tmp, double) as rig:
        rig.plane.propose(intent())
        await eventually(lambda: len(top_messages(double)) == 1, "the proposal's message")
        [message] = top_messages(double)
        # Unknown is not "stopped": fresh data missing must leave the proposal waiting.
        rig.lens.holds = None
        sweeps = rig.config.approvals.sweep_interval_s * 5
        await asyncio.sleep(sweeps)
        assert rig.plane.listing()[0]["state"] == "pending"
        assert has_buttons(message)
        rig.lens.holds = False
        await eventually(lambda: "No longer needed" in header(message), "the withdrawal shown")
        [listed] = rig.plane.listing()
    assert listed["state"] == "no_longer_needed"
    assert listed["reason"] == "the condition stopped holding"
    assert "the condition stopped holding" in str(message.blocks)
    assert not has_buttons(message), "a withdrawn proposal takes no more clicks"
    assert rig.actuator.applied == []
    assert len(top_messages(double)) == 1
    assert double.store.replies(CHANNEL, message.ts) == [], "a withdrawal edits, never replies"


async def test_notify_posts_a_plain_message_once_through_a_rate_limit(
    short_tmp: Path, double: SlackDouble
) -> None:
    double.fault("chat.postMessage", RateLimited(retry_after_s=1))
    async with approvals_rig(short_tmp, double) as rig:
        sent = await rig.plane.notify("runs 12 requests (busy-note)", "main")
    assert sent is True
    [note] = top_messages(double)
    assert note.text == "*main*: runs 12 requests (busy-note)"
    assert [c.fault for c in double.calls_to("chat.postMessage")] == ["RateLimited", None]


async def test_notify_says_false_when_slack_fails_or_is_not_configured(
    short_tmp: Path, double: SlackDouble
) -> None:
    # A 500 may have posted: a notification is not repeated blindly, it is reported unsent.
    double.fault("chat.postMessage", ServerError(500))
    async with approvals_rig(short_tmp / "with", double) as rig:
        failed = await rig.plane.notify("a note")
    async with approvals_rig(short_tmp / "without", None) as rig:
        assert rig.plane.slack is None
        unconfigured = await rig.plane.notify("a note")
    assert (failed, unconfigured) == (False, False)
    assert len(double.calls_to("chat.postMessage")) == 1
