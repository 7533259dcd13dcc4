"""A group change with real governors: one proposal for the group, a canary that fails, reverted.

Three governors, each over its own supervised ``sim serve``, are the replicas of one group.
The same ``scope: group`` policy fires on all three at once; exactly one of them proposes
(the group's rollout key in etcd is claimed once), the other two log that it was proposed.
Approved from the CLI on the proposer, the change goes to the canary (the proposer's own
server) through the normal actuation path. The servers carry no load, so the canary's
comparison window sees fewer requests than the rule's ``min_requests``: inconclusive, which
fails: the canary is reverted (its server restarted twice), nobody else is changed, and the
rollout in etcd is aborted with the verdict's figures in its history. The proposal's record
follows it to ``rolled_back``, the proposer (its driver) told each line of the rollout once
(no Slack here: its log says each line it would have posted), and ``fleet status`` lists the
rollout.

In the second test the servers carry a light load, the canary passes, and the governor
driving the rollout is killed (SIGKILL) while the others are being changed: once its lease
has expired exactly one other governor takes the rollout over and finishes it, and every
server is restarted exactly once. No line of the rollout is told twice across the three
governors, and the lines from the takeover on are told by the one that took over.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from daemon.app.control_client import call_daemon
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.rollout_lines import thread_lines
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


# A few requests a second over seconds are noisy (Poisson arrivals; a restarted sim's load
# starts again): this test is about the driver's death, so the canary's bounds are wide.
PASSING_POLICY = GROUP_POLICY.replace(
    "canary: {window: 3s, min_requests: 20}",
    "canary: {window: 4s, min_requests: 3, max_goodput_drop: 90%, max_attainment_drop: 50%}",
)
LIGHT_LOAD = """\
name: light
duration_s: 3600
seed: 5
arrivals: {rate_rps: 3}
prompt_tokens: {median: 100, p90: 200, max: 400}
output_tokens: {median: 20, p90: 40, max: 80}
"""


def member_config(
    directory: Path,
    sim: SupervisedSim,
    endpoints: list[str],
    host: str,
    policy: str = GROUP_POLICY,
) -> Path:
    # A TTFT p95 of a few ms doubles on a loaded two-core machine: the actuator's own bound is
    # relaxed (as approval_config does); the canary analysis is what this test is about.
    config = governor_config(directory, sim, max_ttft_ratio=50.0)
    text = config.read_text() + (
        "[fleet]\nenabled = true\n"
        f"endpoints = {json.dumps(endpoints)}\n"
        f'prefix = "{PREFIX}"\nhost = "{host}"\ngroups = {{ sim = "llama" }}\n'
        "max_unavailable = 1\nslot_wait_s = 120\n"
        "lease_ttl_s = 6\nrefresh_s = 0.5\nrequest_timeout_s = 2.0\n"
        f'[approvals.restart]\nusers = ["{unix_user()}"]\ntwo_person = false\n'
    )
    config.write_text(text)
    (directory / "policies" / "group-seqs.yaml").write_text(policy)
    return config


def rollout(endpoints: list[str]) -> Rollout | None:
    async def read() -> Rollout | None:
        stored = await RolloutStore(EtcdGateway(endpoints, 5), FleetKeys(PREFIX)).read(
            "llama", "group-seqs"
        )
        return None if stored is None else stored.rollout

    return asyncio.run(read())


def told(governor: RunningDaemon) -> list[str]:
    """The keys of the rollout's lines this governor posted (or, without Slack, would have)."""
    wanted = {"rollout line posted", "rollout line not sent"}
    return [r["line"] for r in governor.log_records() if r.get("msg") in wanted]


def fleet_status(config: Path) -> dict[str, Any]:
    """``vllm-governor fleet status --json`` as a user runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", "fleet", "status", "--json", "--config",
         str(config)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


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

        def settled() -> dict[str, Any] | None:
            [found] = call_daemon(sockets[proposer], "proposals")["proposals"]
            return found if found["state"] == "rolled_back" else None

        record = eventually(settled, "the proposal rolled back", governors[proposer], 30)
        keys = [line.key for line in thread_lines(final)]
        eventually(
            lambda: told(governors[proposer]) == keys or None, "every line told", governors[0], 30
        )
        lines_told = [told(governor) for governor in governors]
        [listed] = fleet_status(configs[0])["rollouts"]
    assert record["id"] == pending[proposer][0]["id"]
    assert record["reason"].startswith("0 of 3 members changed; host-")
    assert [len(found) for i, found in enumerate(lines_told) if i != proposer] == [0, 0]
    assert (listed["phase"], listed["proposal"], listed["canary"]) == (
        "aborted",
        record["id"],
        f"host-{proposer}/sim",
    )
    assert (listed["driver"], listed["driving_now"]) == (f"host-{proposer}", False)
    assert final.phase is Phase.ABORTED, final.history
    assert final.canary == f"host-{proposer}/sim"
    assert final.verdict is not None
    assert not final.verdict.passed
    assert any("inconclusive" in failure for failure in final.verdict.failures)
    assert any(line.startswith("canary failed: ") for line in final.history)
    assert final.history[-1].startswith(f"host-{proposer}/sim: revert done")
    assert spawns[proposer] == 3, spawns  # started, the change, the revert
    assert [n for i, n in enumerate(spawns) if i != proposer] == [1] * (REPLICAS - 1)


@pytest.mark.timeout(240)
def test_when_the_driver_is_killed_mid_rollout_exactly_one_other_finishes_it(
    short_tmp: Path,
) -> None:
    with ExitStack() as stack:
        etcd = stack.enter_context(EtcdCluster(short_tmp / "etcd"))
        directories = [short_tmp / f"g{i}" for i in range(REPLICAS)]
        sims: list[SupervisedSim] = []
        for directory in directories:
            directory.mkdir()
            sim = supervised_sim(directory, "max-num-seqs: 8\n", load=LIGHT_LOAD)
            sims.append(stack.enter_context(sim))
        configs = [
            member_config(directory, sim, etcd.endpoints, f"host-{i}", PASSING_POLICY)
            for i, (directory, sim) in enumerate(zip(directories, sims, strict=True))
        ]
        governors: list[RunningDaemon] = [
            stack.enter_context(running_daemon(config)) for config in configs
        ]
        for governor in governors:
            governor.wait_for("READY=1", timeout_s=60)

        def proposed() -> int | None:
            logs = [governor.log_text() for governor in governors]
            return next((i for i, text in enumerate(logs) if "group change proposed" in text), None)

        driver = eventually(proposed, "one proposal", governors[0], 30)
        found = call_daemon(directories[driver] / "control.sock", "proposals")["proposals"]
        approved = subprocess.run(
            [sys.executable, "-m", "daemon.app.cli", "approve", found[0]["id"],
             "--config", str(configs[driver])],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        assert approved.returncode == 0, approved.stdout + approved.stderr

        def rolling() -> Rollout | None:
            found = rollout(etcd.endpoints)
            return found if found is not None and found.phase is Phase.ROLLING else None

        eventually(rolling, "the canary passed", governors[driver], 90)
        governors[driver].process.kill()  # kill -9: its lease (6 s) ends its driver key
        survivor = governors[(driver + 1) % REPLICAS]

        def finished() -> Rollout | None:
            found = rollout(etcd.endpoints)
            return found if found is not None and found.phase.finished else None

        final = eventually(finished, "the rollout finished", survivor, 120)
        spawns = [sim.spawns() for sim in sims]
        took_over_at = next(
            i for i, line in enumerate(final.history) if line.startswith("driven by")
        )
        after = {f"h{i}" for i in range(took_over_at, len(final.history))} | {"end"}
        others = [i for i in range(REPLICAS) if i != driver]

        def told_after() -> list[list[str]] | None:
            found = [told(governors[i]) for i in others]
            return found if any(after <= set(keys) for keys in found) else None

        eventually(told_after, "the lines after the takeover", survivor, 30)
        lines_told = [told(governor) for governor in governors]
    assert max(Counter(key for keys in lines_told for key in keys).values()) == 1, lines_told
    new_driver = next(i for i in others if after <= set(lines_told[i]))
    assert final.driver == f"host-{new_driver}"
    assert final.phase is Phase.DONE, final.history
    assert final.verdict is not None
    assert final.verdict.passed, final.verdict.summary()
    took_over = [line for line in final.history if line.startswith("driven by")]
    assert len(took_over) == 1, final.history
    assert not took_over[0].startswith(f"driven by host-{driver} ")
    assert spawns == [2] * REPLICAS, spawns  # each server restarted exactly once
