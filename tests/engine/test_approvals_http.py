"""The HTTP interactivity transport and the Slack freeze command, on the engine.

Slack's signed posts are made as Slack makes them (tests/support/slack_double/interactivity);
forged, replayed and stale ones get 401 and change nothing.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest

from actuators.vllm.freezes import freeze_reason as actuator_freeze_reason
from daemon.core.clock import SystemClock
from daemon.engine.actuation.freeze_files import remove_freeze, write_freeze
from tests.support.slack_double import SlackDouble, block_actions, post, signed_request
from tests.support.slack_double.approvals_rig import (
    ALICE,
    MALLORY,
    SIGNING_SECRET,
    approvals_rig,
    intent,
)
from tests.support.slack_double.interactivity import SignedRequest
from tests.support.slack_double.messages import CHANNEL
from tests.support.tasks import eventually


@pytest.mark.asyncio
async def test_signed_clicks_count_and_forged_or_replayed_ones_get_401(
    short_tmp: Path, double: SlackDouble
) -> None:
    async with approvals_rig(short_tmp, double, transport="http") as rig:
        rig.plane.propose(intent())
        await eventually(lambda: bool(double.store.in_channel(CHANNEL)), "the message")
        assert rig.plane.slack is not None
        await eventually(lambda: rig.plane.slack.http_port is not None, "the endpoint")  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{rig.plane.slack.http_port}/slack/interactivity"
        [message] = double.store.in_channel(CHANNEL)
        now = int(time.time())
        by_mallory = block_actions(message, MALLORY, "approval.approve", action_ts="1.000001")
        by_alice = block_actions(message, ALICE, "approval.approve", action_ts="1.000002")
        forged = signed_request(by_alice, "not-the-secret", now)
        # Mallory's own signed click, with the body changed to Alice's: the signature breaks.
        real = signed_request(by_mallory, SIGNING_SECRET, now)
        swapped = SignedRequest(real.body.replace(MALLORY.encode(), ALICE.encode()), real.headers)
        stale = signed_request(by_alice, SIGNING_SECRET, now - 301)
        refused = [await post(url, forged), await post(url, swapped), await post(url, stale)]
        assert rig.plane.listing()[0]["state"] == "pending"
        good = signed_request(by_alice, SIGNING_SECRET, now)
        accepted = await post(url, good)
        replayed = await post(url, good)
        await eventually(lambda: bool(rig.actuator.applied), "the change applied")
        await eventually(lambda: rig.plane.listing()[0]["state"] == "verified", "verified")
    assert refused == [(401, "forged"), (401, "forged"), (401, "stale")]
    assert accepted == (200, "")
    assert replayed == (401, "replayed")
    assert len(rig.actuator.applied) == 1


@pytest.mark.asyncio
async def test_a_slash_command_freezes_and_the_freeze_refuses_clicks(
    short_tmp: Path, double: SlackDouble
) -> None:
    async with approvals_rig(short_tmp, double) as rig:
        rig.plane.propose(intent())
        await eventually(lambda: bool(double.store.in_channel(CHANNEL)), "the message")
        await double.socket.wait_connections(1)
        command = {
            "command": "/governor",
            "text": "freeze main 30m load test in progress",
            "user_id": ALICE,
            "channel_id": CHANNEL,
        }
        envelope = await double.socket.push(command, "slash_commands")
        await double.socket.wait_ack(envelope.envelope_id)
        await eventually(lambda: bool(double.store.ephemerals), "the answer")
        denied = {**command, "user_id": MALLORY}
        await double.socket.push(denied, "slash_commands")
        await eventually(lambda: len(double.store.ephemerals) == 2, "the refusal")
        [message] = double.store.in_channel(CHANNEL)
        await double.socket.push(block_actions(message, ALICE, "approval.approve", action_ts="9.1"))
        await eventually(lambda: len(double.store.ephemerals) == 3, "the click's refusal")
        state = rig.plane.listing()[0]["state"]
    texts = [e.text for e in double.store.ephemerals]
    assert texts[0].startswith("Frozen: main until ")
    assert texts[1] == "Refused: you are on no approvals allow-list"
    assert texts[2].startswith("Refused: a freeze is in force: frozen by ")
    assert state == "pending"
    assert rig.actuator.applied == []
    assert actuator_freeze_reason(short_tmp, "main", SystemClock().wall())


def test_a_freeze_written_by_the_engine_is_one_the_actuator_honours(tmp_path: Path) -> None:
    now = SystemClock().wall()
    write_freeze(tmp_path, "*", now + timedelta(minutes=5), "incident\nwith a newline")
    shown = actuator_freeze_reason(tmp_path, "main", now)
    assert shown.startswith(f"frozen by {tmp_path / 'freeze'} until ")
    assert shown.endswith(": incident with a newline")  # the reason, flattened to one line
    assert actuator_freeze_reason(tmp_path, "main", now + timedelta(minutes=6)) == ""
    assert (tmp_path / "freeze").read_text().count("\n") == 2


@pytest.mark.asyncio
async def test_a_slash_unfreeze_of_a_path_is_refused_and_removes_nothing(
    short_tmp: Path, double: SlackDouble
) -> None:
    # Issue 15, finding 7: the same check as the CLI's, through the same plane.
    state = short_tmp / "state"
    state.mkdir()
    (state / "freeze.x").mkdir()
    victim = short_tmp / "victim"
    victim.write_text("not the governor's to delete\n")
    async with approvals_rig(state, double):
        await double.socket.wait_connections(1)
        command = {
            "command": "/governor",
            "text": "unfreeze x/../../victim",
            "user_id": ALICE,
            "channel_id": CHANNEL,
        }
        await double.socket.push(command, "slash_commands")
        await eventually(lambda: bool(double.store.ephemerals), "the answer")
    [answer] = [e.text for e in double.store.ephemerals]
    assert answer == "Refused: no vLLM instance named 'x/../../victim' (known: main; or * for all)"
    assert victim.read_text() == "not the governor's to delete\n"


@pytest.mark.parametrize("target", ["x/../../victim", "", "a\0b"])
def test_a_freeze_file_is_never_named_by_a_path(tmp_path: Path, target: str) -> None:
    # The last check, where the file is named, behind the plane's check of known targets.
    with pytest.raises(ValueError, match="a freeze target is a server's name"):
        remove_freeze(tmp_path, target)
