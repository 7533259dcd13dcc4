"""A Slack approval end to end: the real daemon, the Slack double, a supervised ``sim serve``.

Everything the governor touches is real: the daemon is a subprocess with its secrets in the
environment and ``[slack]`` pointing at the wire-level Slack double (Socket Mode), which the
daemon's own slack-sdk clients talk to; supervisord restarts ``sim serve`` under load; the
approval-risk policy fires on signals the daemon scrapes. The test plays Slack's side: it
reads the posted message and pushes button presses as Socket Mode envelopes, as Slack would.

The governor is restarted between the proposal and the clicks: the proposal must not be posted
again and must still be decidable. An unauthorised click and a double click must change
nothing; the one good click restarts the server with the new value, edits the message to say
who approved and what came of it, and replies in its thread.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from daemon.app.control_client import call_daemon
from tests.support.daemon import RunningDaemon, running_daemon
from tests.support.retune import approval_config, finished, journal, running_now
from tests.support.slack_double import APP_TOKEN, BOT_TOKEN, Envelope, SlackDouble
from tests.support.slack_double.messages import (
    CHANNEL,
    ephemerals_to,
    header,
    top_messages,
    unset_proxies,
)
from tests.support.slack_double.store import Message
from tests.support.supervised_sim import SATURATING_WORKLOAD, SupervisedSim, supervised_sim

pytestmark = [pytest.mark.service("supervisord"), pytest.mark.slow, pytest.mark.timeout(300)]

T = TypeVar("T")

ALICE, BOB, MALLORY = "U0ALICE", "U0BOB", "U0MALLORY"


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon inherits this environment; slack-sdk must reach the double on loopback."""
    unset_proxies(monkeypatch)


def slack_config(double: SlackDouble) -> str:
    """``[slack]`` at the double (no tokens: they are secrets) and a quick approvals sweep."""
    return f"""
[slack]
enabled = true
channel = "{CHANNEL}"
api_base_url = "{double.base_url}"
transport = "socket_mode"
timeout_s = 5.0
max_retries = 3
retry_max_delay_s = 2.0
[approvals]
sweep_interval_s = 0.5
"""


SECRETS = {
    "VLLM_GOVERNOR_SLACK_BOT_TOKEN": BOT_TOKEN,
    "VLLM_GOVERNOR_SLACK_APP_TOKEN": APP_TOKEN,
}


async def until(
    check: Callable[[], T | None], what: str, daemon: RunningDaemon, timeout_s: float = 60.0
) -> T:
    """Poll ``check`` (in a thread: it may block) until it answers; fail with the daemon's log."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = await asyncio.to_thread(check)
        if found is not None and found is not False:
            return found
        assert daemon.process.poll() is None, f"the daemon exited:\n{daemon.log_text()[-6000:]}"
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout_s} s; log:\n{daemon.log_text()[-6000:]}")


async def press(double: SlackDouble, message: Message, user: str) -> Envelope:
    """``user`` presses Approve: a Socket Mode envelope, which the governor must acknowledge."""
    envelope = await double.press(CHANNEL, message.ts, user, "approval.approve")
    return await double.socket.wait_ack(envelope.envelope_id, timeout_s=30.0)


async def stop(daemon: RunningDaemon) -> None:
    """Stop the daemon as systemd does, and wait for it to exit cleanly."""
    daemon.signal(signal.SIGTERM)
    code = await asyncio.to_thread(daemon.process.wait, 30)
    assert code == 0, daemon.log_text()[-4000:]


def served_since(sim: SupervisedSim) -> int | None:
    """When the running ``sim serve`` started serving, from ``/v1/models`` (None while down)."""
    answer = sim.get("/v1/models")
    if answer is None or answer[0] != 200:
        return None
    return int(json.loads(answer[1])["data"][0]["created"])


async def scenario(directory: Path, sim: SupervisedSim, double: SlackDouble) -> None:
    config = approval_config(directory, sim, [ALICE, BOB], extra=slack_config(double))
    socket = directory / "control.sock"

    def proposals() -> list[dict[str, Any]]:
        return list(call_daemon(socket, "proposals")["proposals"])

    with running_daemon(config, env=SECRETS) as first:
        await asyncio.to_thread(first.wait_for, "READY=1")
        await until(lambda: len(top_messages(double)) == 1, "the proposal posted", first)
        await double.socket.wait_connections(1, timeout_s=30.0)
        [proposal] = await asyncio.to_thread(proposals)
        [message] = top_messages(double)
        assert proposal["slack_message"] == {"channel": CHANNEL, "ts": message.ts}
        assert header(message).startswith(":raised_hand: Approval needed: max_num_seqs 8 → 16")
        assert journal(directory) == [], "nothing is applied before a person decides"
        await stop(first)

    # A new governor on the same state: the proposal is still there, not posted again.
    with running_daemon(config, env=SECRETS) as daemon:
        await asyncio.to_thread(daemon.wait_for, "READY=1")
        await double.socket.wait_connections(2, timeout_s=30.0)
        await until(lambda: len(double.socket.open_connections) == 1, "reconnected", daemon)
        [again] = await asyncio.to_thread(proposals)
        assert (again["id"], again["state"]) == (proposal["id"], "pending")
        before = served_since(sim)
        assert before is not None
        assert (running_now(sim) or 0.0) <= 8.0, "the server runs with max-num-seqs 8"

        refused = await press(double, message, MALLORY)
        await until(lambda: ephemerals_to(double, MALLORY), "Mallory answered", daemon)
        [listed] = await asyncio.to_thread(proposals)
        assert listed["state"] == "pending"

        # A double click: both acknowledged, only the first counts.
        clicks = [await press(double, message, ALICE), await press(double, message, ALICE)]
        done = await until(finished(directory), "the change finished", daemon, 90.0)
        assert done["state"] == "done", done
        await until(lambda: "verified" in header(message), "the message shows the outcome", daemon)
        await until(lambda: double.store.replies(CHANNEL, message.ts), "a thread reply", daemon)
        await until(lambda: ephemerals_to(double, ALICE), "the second click answered", daemon)
        # The server restarted with the new value: a new process, running more than 8 at once.
        await until(lambda: (served_since(sim) or before) != before, "a new server", daemon)
        await until(lambda: (running_now(sim) or 0.0) > 8.0, "more than 8 running", daemon)
        [decided] = await asyncio.to_thread(proposals)
        logged = daemon.log_records()

    assert all(envelope.acked_at is not None for envelope in [refused, *clicks])
    assert ephemerals_to(double, MALLORY) == ["Refused: you may not decide restart proposals"]
    [second_click] = ephemerals_to(double, ALICE)
    assert second_click.startswith("Refused: already "), second_click
    assert decided["state"] == "verified"
    assert [(v["user"], v["action"], v["via"]) for v in decided["votes"]] == [
        (ALICE, "approve", "slack")
    ]
    # One proposal message in all, edited to show who approved and what came of it.
    assert len(top_messages(double)) == 1
    assert header(message).startswith(":white_check_mark: Applied and verified")
    assert f"<@{ALICE}>" in json.dumps(message.blocks)
    assert not any(block["type"] == "actions" for block in message.blocks), "no more buttons"
    [reply] = double.store.replies(CHANNEL, message.ts)
    assert reply.text.startswith(":white_check_mark: Applied and verified")
    assert len(double.calls_to("chat.postMessage")) == 2  # the proposal and its one reply
    assert sim.vllm_yaml.read_text().endswith("max-num-seqs: 16\n")
    assert sim.spawns() == 2
    assert len(journal(directory)) == 1
    # The secrets reached the daemon through its environment and never its log.
    assert not any(BOT_TOKEN in json.dumps(r) or APP_TOKEN in json.dumps(r) for r in logged)


async def with_double(directory: Path, sim: SupervisedSim) -> None:
    async with SlackDouble() as double:
        await scenario(directory, sim, double)


def test_a_slack_approval_survives_a_restart_and_restarts_the_server(short_tmp: Path) -> None:
    with supervised_sim(short_tmp, "max-num-seqs: 8\n", load=SATURATING_WORKLOAD) as sim:
        asyncio.run(with_double(short_tmp, sim))
