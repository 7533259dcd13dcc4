"""``vllm-governor fleet status`` lists the group changes' rollouts, read from a real etcd.

Two rollouts: one live (approved, its canary asked, driven by h1 under its lease) and one that
was stopped and whose driver gave its key back. The command, run in process as a user runs it
(``--json`` and the table), shows for each: group, proposal, phase, canary, the members done
and remaining, who drives it (or drove it last), and when it started and was last written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from daemon.app.commands.fleet import main_status
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.rollout_driver import RolloutDriver
from daemon.fleet.rollout_state import abort, propose
from daemon.fleet.rollout_store import RolloutStore
from tests.support.daemon import write_config
from tests.support.etcd import EtcdCluster
from tests.support.rollout_fleet import Clock

pytestmark = pytest.mark.service("etcd")
PREFIX = "/status/"
KEYS = FleetKeys(PREFIX)
MEMBERS = ("h1/main", "h2/main", "h3/main")


async def _rollouts(client: EtcdGateway) -> None:
    store = RolloutStore(client, KEYS)
    lease = await client.grant(60)
    driver = RolloutDriver(
        store,
        host="h1",
        lease=lambda: lease,
        slots_of=lambda group, size: 1,
        clock=Clock(),
        poll_s=1.0,
        moved=lambda rollout: None,
    )
    for group, policy in (("llama", "shrink"), ("mistral", "grow")):
        proposed = propose(group, policy, {"max_num_seqs": 48}, MEMBERS, "h2/main")
        assert (await store.propose(proposed)).created
        decided = await driver.decide(group, policy, "ops", approved=True, proposal=f"p-{group}")
        assert decided == ""
    stored = await store.read("mistral", "grow")
    assert stored is not None
    driver_key = await store.take_driver("mistral", "grow", "h1", lease)
    assert await store.write(stored, abort(stored.rollout, "stopped by hand"), driver_key)
    await store.release_driver("mistral", "grow", driver_key)


def _config(directory: Path, endpoints: list[str]) -> Path:
    listed = ", ".join(f'"{url}"' for url in endpoints)
    extra = f'[fleet]\nenabled = true\nendpoints = [{listed}]\nprefix = "{PREFIX}"\n'
    return write_config(directory, extra=extra)


def test_fleet_status_lists_each_rollout_with_its_progress_and_driver(
    short_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with EtcdCluster(short_tmp / "etcd") as etcd:
        asyncio.run(_rollouts(EtcdGateway(etcd.endpoints, timeout_s=5)))
        config = _config(short_tmp, etcd.endpoints)
        assert main_status(argparse.Namespace(config=config, json=True)) == 0
        answer = json.loads(capsys.readouterr().out)
        assert main_status(argparse.Namespace(config=config, json=False)) == 0
        table = capsys.readouterr().out.splitlines()
    live, stopped = answer["rollouts"]
    assert {k: v for k, v in live.items() if k not in {"started_at", "updated_at"}} == {
        "group": "llama",
        "policy": "shrink",
        "proposal": "p-llama",
        "phase": "canary",
        "canary": "h2/main",
        "members_done": [],
        "members_remaining": list(MEMBERS),
        "driver": "h1",
        "driving_now": True,
        "verdict": None,
        "last": "approved by ops; canary h2/main asked to apply",
    }
    assert live["started_at"] <= live["updated_at"]
    assert (stopped["phase"], stopped["driver"], stopped["driving_now"]) == ("aborted", "h1", False)
    assert stopped["last"] == "aborted: stopped by hand"
    header = table.index("rollouts:") + 1
    assert table[header].split() == [
        *("GROUP", "POLICY", "PROPOSAL", "PHASE", "CANARY", "DONE", "DRIVER", "STARTED"),
        "UPDATED",
    ]
    assert table[header + 1].split()[:7] == [
        *("llama", "shrink", "p-llama", "canary", "h2/main", "0/3", "h1"),
    ]
    assert table[header + 2].split()[:7] == [
        *("mistral", "grow", "p-mistral", "aborted", "h2/main", "0/3", "(h1)"),
    ]
    assert "  llama/shrink: remaining h1/main, h2/main, h3/main; last: approved by ops; " in (
        "\n".join(table)
    )
