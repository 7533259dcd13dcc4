"""``/governor fleet-freeze`` and ``fleet-unfreeze`` from Slack (the double), into a real etcd."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.freeze_writes import FleetFreezer
from daemon.fleet.keys import FleetKeys
from daemon.fleet.records import FreezeRecord
from tests.support.etcd import EtcdCluster
from tests.support.slack_double import SlackDouble
from tests.support.slack_double.approvals_rig import ALICE, MALLORY, approvals_rig
from tests.support.slack_double.messages import CHANNEL
from tests.support.tasks import eventually

pytestmark = [pytest.mark.asyncio, pytest.mark.service("etcd")]
KEYS = FleetKeys("/slack/")


async def test_a_slash_command_freezes_a_group_of_the_fleet_and_lifts_it(
    short_tmp: Path, double: SlackDouble
) -> None:
    with EtcdCluster(short_tmp / "etcd") as etcd:
        client = EtcdGateway(etcd.endpoints, timeout_s=5)
        freezer = FleetFreezer(client, KEYS)
        async with approvals_rig(short_tmp, double, fleet_freezer=freezer):
            await double.socket.wait_connections(1)

            async def say(user: str, text: str, answers: int) -> None:
                command = {"command": "/governor", "text": text, "user_id": user}
                await double.socket.push({**command, "channel_id": CHANNEL}, "slash_commands")
                await eventually(lambda: len(double.store.ephemerals) == answers, text)

            await say(ALICE, "fleet-freeze llama 30m model swap", 1)
            await say(MALLORY, "fleet-unfreeze llama", 2)
            stored = await client.get(KEYS.freeze("llama"))
            assert stored is not None
            record = FreezeRecord.from_json(stored.value)
            await say(ALICE, "fleet-freeze ../x 30m no", 3)
            await say(ALICE, "fleet-unfreeze llama", 4)
            lifted = await client.get(KEYS.freeze("llama"))
    texts = [e.text for e in double.store.ephemerals]
    assert texts[0].startswith("Frozen: group llama until ")
    assert texts[0].endswith("(model swap)")
    assert texts[1] == "Refused: you are on no approvals allow-list"
    assert (record.group, record.reason, record.by) == ("llama", "model swap", ALICE)
    assert texts[2] == "Refused: '../x' is not a group's name"
    assert texts[3] == "Unfrozen: group llama"
    assert lifted is None


async def test_a_governor_in_no_fleet_says_so(short_tmp: Path, double: SlackDouble) -> None:
    async with approvals_rig(short_tmp, double):
        await double.socket.wait_connections(1)
        command = {"command": "/governor", "text": "fleet-freeze all 1h incident", "user_id": ALICE}
        await double.socket.push({**command, "channel_id": CHANNEL}, "slash_commands")
        await eventually(lambda: bool(double.store.ephemerals), "the answer")
    [answer] = [e.text for e in double.store.ephemerals]
    assert answer == "Refused: this governor is in no fleet ([fleet] is not enabled)"
