"""A group change approved in Slack: the rollout's lines in the proposal's thread, its record following.

One governor (the approvals rig: its approvals plane, store and Slack tasks against the Slack
double) proposes a ``scope: group`` change through the group proposals task, which claims the
rollout in a real etcd; two more governors of the group run the rollout's driver and member
sides in process (:mod:`tests.support.rollout_fleet`). The proposal is approved with its
button; the click goes to the rollout, which carries the message's ``ts``. What is checked is
what a person sees: the thread's replies (every step, the canary analysis with its figures,
the end), the message's headline, and the proposal's state as ``vllm-governor proposals``
lists it (``rolling_out``, then ``rolled_out`` or ``rolled_back``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from daemon.engine.approvals.approvals_plane import ApprovalsPlane
from daemon.engine.approvals.group_changes import GroupDecisions, GroupProposals, thread_replies
from daemon.engine.approvals.rollout_follower import RolloutFollower
from daemon.engine.runtime.supervisor import Readiness
from daemon.fleet.canary_analysis import CanaryRule
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.keys import FleetKeys
from daemon.fleet.rollout_lines import thread_lines
from daemon.fleet.rollout_state import Rollout
from tests.support.etcd import EtcdCluster
from tests.support.rollout_fleet import (
    BAD_SEQS,
    GROUP,
    Clock,
    FleetGovernor,
    Servers,
    until_finished,
)
from tests.support.slack_double import SlackDouble, block_actions
from tests.support.slack_double.approvals_rig import (
    ALICE,
    RecordingActuator,
    approvals_rig,
    intent,
)
from tests.support.slack_double.messages import CHANNEL, header, top_messages
from tests.support.slack_double.store import Message
from tests.support.tasks import eventually, running

pytestmark = [pytest.mark.asyncio, pytest.mark.service("etcd")]
KEYS = FleetKeys("/thread/")
POLICY = "more-seqs"
MEMBERS = ("h1/main", "h2/main", "h3/main")
RULE = CanaryRule(window_s=1.0, min_requests=20)


@dataclass
class Fleet:
    """The proposer's approvals plane and the group's governors."""

    plane: ApprovalsPlane
    proposals: GroupProposals
    governors: list[FleetGovernor]
    states: list[str]  # the proposal's states, as the listing showed them


@asynccontextmanager
async def fleet(short_tmp: Path, double: SlackDouble) -> AsyncIterator[Fleet]:
    """Three governors of group llama; h1 holds the approvals plane (and its Slack)."""
    async with AsyncExitStack() as stack:
        etcd = stack.enter_context(EtcdCluster(short_tmp / "etcd"))
        client = EtcdGateway(etcd.endpoints, timeout_s=5)
        servers = Servers(MEMBERS)
        planes: list[ApprovalsPlane] = []

        async def through_h1(rollout: Rollout, text: str) -> bool:
            return await thread_replies(planes[0])(rollout, text)

        async def nowhere(rollout: Rollout, text: str) -> bool:
            raise AssertionError(f"only the driver posts, not a member: {text}")

        h1 = FleetGovernor(client, KEYS, servers, "h1", through_h1)
        others = [FleetGovernor(client, KEYS, servers, host, nowhere) for host in ("h2", "h3")]
        rule_of = {POLICY: RULE}.get
        decisions = GroupDecisions(h1.driver, lambda instance: GROUP, rule_of)
        actuator = RecordingActuator(short_tmp, knobs={"max_num_seqs": 64.0})
        rig = await stack.enter_async_context(
            approvals_rig(short_tmp, double, actuator=actuator, group_decision=decisions.decided)
        )
        planes.append(rig.plane)
        proposals = GroupProposals(
            h1.store,
            host="h1",
            group_of=lambda instance: GROUP,
            rule_of=rule_of,
            post=rig.plane.propose,
            poll_s=0.05,
            wait_s=5.0,
        )
        follower = RolloutFollower(
            rig.plane.store, h1.store, advance=rig.plane.advance, clock=Clock(), poll_s=0.05
        )
        for governor in (h1, *others):
            await governor.start()
            stack.push_async_callback(governor.stop)
        for name, run in (
            ("group proposals", proposals.run),
            ("group decisions", decisions.run),
            ("group proposal follower", follower.run),
        ):
            await stack.enter_async_context(running(run(Readiness()), name))
        states: list[str] = []
        await stack.enter_async_context(running(_watch(rig.plane, states), "listing"))
        yield Fleet(rig.plane, proposals, [h1, *others], states)


async def _watch(plane: ApprovalsPlane, states: list[str]) -> None:
    """Record each state the proposal's listing shows (what `vllm-governor proposals` prints)."""
    while True:
        listed = plane.listing()
        if listed and (not states or states[-1] != listed[0]["state"]):
            states.append(listed[0]["state"])
        await asyncio.sleep(0.02)


async def approved(fleet: Fleet, double: SlackDouble, new: float) -> Message:
    """Propose the group change on h1, and approve it with the message's button."""
    fleet.proposals.propose(intent(old=64, new=new, policy=POLICY))
    await eventually(lambda: len(top_messages(double)) == 1, "the proposal's message")
    # Click only once the listing has shown it pending: on a loaded machine the watcher,
    # polling every 20 ms, once missed a state the click ended within one poll.
    await eventually(lambda: fleet.states == ["pending"], "the proposal listed as pending")
    await double.socket.wait_connections(1)
    message = top_messages(double)[0]
    payload = block_actions(message, ALICE, "approval.approve", action_ts="1700002000.000001")
    envelope = await double.socket.push(payload)
    await double.socket.wait_ack(envelope.envelope_id)
    return message


def replies(double: SlackDouble, message: Message) -> list[str]:
    return [reply.text for reply in double.store.replies(CHANNEL, message.ts)]


async def test_a_passing_canary_is_told_in_the_thread_and_the_proposal_is_rolled_out(
    short_tmp: Path, double: SlackDouble
) -> None:
    async with fleet(short_tmp, double) as group:
        message = await approved(group, double, 48.0)
        final = await until_finished(group.governors[0].store, POLICY)
        expected = [line.text for line in thread_lines(final)]
        await eventually(lambda: replies(double, message) == expected, "the rollout's lines")
        await eventually(lambda: group.states[-1] == "rolled_out", "the proposal rolled out")
        await eventually(lambda: "Rolled out to the group" in header(message), "the headline")
        listed = group.plane.listing()[0]
    assert final.thread == (CHANNEL, message.ts)
    assert group.states == ["pending", "approved", "rolling_out", "rolled_out"]
    assert listed["reason"] == "3 of 3 members changed; every member changed"
    thread = replies(double, message)
    assert thread[0] == "approved by U0ALICE; canary h1/main asked to apply"
    analysis = next(text for text in thread if text.startswith("Canary analysis"))
    assert analysis.splitlines()[:3] == [
        "Canary analysis over 1 s (TTFT SLO 2 s): *passed*",
        "• canary h1/main: 300 requests, SLO attainment 95.0%, goodput 9.50 req/s per server,"
        " errors 0.0%",
        "• baseline, 2 unchanged member(s): 600 requests, SLO attainment 95.0%,"
        " goodput 9.50 req/s per server, errors 0.0%",
    ]
    assert thread[-1] == (
        ":white_check_mark: Rolled out: all 3 members of group llama run max_num_seqs=48."
    )


async def test_a_failing_canary_is_reverted_with_the_evidence_in_the_thread(
    short_tmp: Path, double: SlackDouble
) -> None:
    async with fleet(short_tmp, double) as group:
        message = await approved(group, double, BAD_SEQS)
        final = await until_finished(group.governors[0].store, POLICY)
        expected = [line.text for line in thread_lines(final)]
        await eventually(lambda: replies(double, message) == expected, "the rollout's lines")
        await eventually(lambda: group.states[-1] == "rolled_back", "the proposal rolled back")
        await eventually(lambda: "Canary failed, rolled back" in header(message), "the headline")
    assert group.states == ["pending", "approved", "rolling_out", "rolled_back"]
    thread = replies(double, message)
    analysis = next(text for text in thread if text.startswith("Canary analysis"))
    assert analysis.splitlines() == [
        "Canary analysis over 1 s (TTFT SLO 2 s): *failed*",
        "• canary h1/main: 300 requests, SLO attainment 66.7%, goodput 6.67 req/s per server,"
        " errors 0.0%",
        "• baseline, 2 unchanged member(s): 600 requests, SLO attainment 95.0%,"
        " goodput 9.50 req/s per server, errors 0.0%",
        "• SLO attainment 28.3 points lower (at most 5)",
        "• goodput 29.8% lower (at most 10%)",
        "h1/main asked to revert; the rollout stops.",
    ]
    assert thread[-2].startswith("h1/main: revert done")
    assert thread[-1].startswith(":leftwards_arrow_with_hook: Rolled back: the canary h1/main")
