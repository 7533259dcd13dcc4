"""A group change with real governors: one proposal for the group, a canary that fails, reverted.

Three governors, each over its own supervised ``sim serve``, are the replicas of one group.
The same ``scope: group`` policy fires on all three at once; exactly one of them proposes
(the group's rollout key in etcd is claimed once), the other two log that it was proposed.
Approved from the CLI on the proposer, the change goes to the canary (the proposer's own
server) through the normal actuation path. The servers carry no load, so the canary's
comparison window sees fewer requests than the rule's ``min_requests``: inconclusive, which
fails: the canary is reverted (its server restarted twice), nobody else is changed, and the
rollout in etcd is aborted with the verdict's figures in its history.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from daemon.app.control_client import call_daemon
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.rollout_state import Phase, Rollout
from daemon.fleet.rollout_store import RolloutStore
from tests.support.daemon import RunningDaemon, running_daemon
from tests.support.etcd import EtcdCluster
from tests.support.retune import eventually, governor_config, unix_user
from tests.support.supervised_sim import SupervisedSim, supervised_sim

pytestmark = [pytest.mark.service("etcd"), pytest.mark.service("supervisord"), pytest.mark.slow]
REPLICAS = 3
PREFIX = "/rollout/"

GROUP_POLICY = """\
name: group-seqs
targets: [sim]
when: waiting >= 0.0
action: {set: {max_num_seqs: 6}}
scope: group
canary: {window: 3s, min_requests: 20}
cooldown: 1h
"""


def member_config(directory: Path, sim: SupervisedSim, endpoints: list[str], host: str) -> Path:
    config = governor_config(directory, sim)
    text = config.read_text() + (
        "[fleet]\nenabled = true\n"
        f"endpoints = {json.dumps(endpoints)}\n"
        f'prefix = "{PREFIX}"\nhost = "{host}"\ngroups = {{ sim = "llama" }}\n'
        "max_unavailable = 1\nslot_wait_s = 120\n"
        "lease_ttl_s = 6\nrefresh_s = 0.5\nrequest_timeout_s = 2.0\n"
        f'[approvals.restart]\nusers = ["{unix_user()}"]\ntwo_person = false\n'
    )
    config.write_text(text)
    (directory / "policies" / "group-seqs.yaml").write_text(GROUP_POLICY)
    return config


def rollout(endpoints: list[str]) -> Rollout | None:
    async def read() -> Rollout | None:
        stored = await RolloutStore(EtcdGateway(endpoints, 5), FleetKeys(PREFIX)).read(
            "llama", "group-seqs"
        )
        return None if stored is None else stored.rollout

    return asyncio.run(read())


def test_one_proposal_for_the_group_and_a_failing_canary_is_reverted(short_tmp: Path) -> None:
    with ExitStack() as stack:
        etcd = stack.enter_context(EtcdCluster(short_tmp / "etcd"))
        directories = [short_tmp / f"g{i}" for i in range(REPLICAS)]
        sims: list[SupervisedSim] = []
        for directory in directories:
            directory.mkdir()
            sims.append(stack.enter_context(supervised_sim(directory, "max-num-seqs: 8\n")))
        configs = [
            member_config(directory, sim, etcd.endpoints, f"host-{i}")
            for i, (directory, sim) in enumerate(zip(directories, sims, strict=True))
        ]
        governors: list[RunningDaemon] = [
            stack.enter_context(running_daemon(config)) for config in configs
        ]
        for governor in governors:
            governor.wait_for("READY=1", timeout_s=60)

        def everyone_answered() -> bool | None:
            logs = [governor.log_text() for governor in governors]
            proposed = sum("group change proposed" in text for text in logs)
            others = sum("group change already proposed" in text for text in logs)
            return (proposed, others) == (1, REPLICAS - 1) or None

        eventually(everyone_answered, "one proposal, two who saw it", governors[0], 30)
        sockets = [directory / "control.sock" for directory in directories]
        pending = [call_daemon(socket, "proposals")["proposals"] for socket in sockets]
        assert sorted(len(found) for found in pending) == [0] * (REPLICAS - 1) + [1]
        proposer = next(i for i, found in enumerate(pending) if found)
        approved = subprocess.run(
            [sys.executable, "-m", "daemon.app.cli", "approve", pending[proposer][0]["id"],
             "--config", str(configs[proposer])],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        assert approved.returncode == 0, approved.stdout + approved.stderr

        def finished() -> Rollout | None:
            found = rollout(etcd.endpoints)
            return found if found is not None and found.phase.finished else None

        final = eventually(finished, "the rollout finished", governors[proposer], 120)
        spawns = [sim.spawns() for sim in sims]
    assert final.phase is Phase.ABORTED, final.history
    assert final.canary == f"host-{proposer}/sim"
    assert final.verdict is not None
    assert not final.verdict.passed
    assert any("inconclusive" in failure for failure in final.verdict.failures)
    assert any(line.startswith("canary failed: ") for line in final.history)
    assert final.history[-1].startswith(f"host-{proposer}/sim: revert done")
    assert spawns[proposer] == 3, spawns  # started, the change, the revert
    assert [n for i, n in enumerate(spawns) if i != proposer] == [1] * (REPLICAS - 1)
