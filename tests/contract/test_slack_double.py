"""The Slack double, driven by the real slack-sdk clients: what the governor's Slack code will
meet, including rate limits, outages, cut connections and Socket Mode reconnections."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from daemon.approvals.clicks import ButtonKind, Press, read_press
from daemon.approvals.errors import UnverifiedRequest
from daemon.approvals.signatures import RequestVerifier
from daemon.core.clock import SystemClock
from tests.support.slack_double import (
    APP_TOKEN,
    BOT_TOKEN,
    Drop,
    RateLimited,
    ServerError,
    SlackDouble,
    Slow,
    block_actions,
    post,
    signed_request,
)
from tests.support.slack_double.messages import unset_proxies
from tests.support.tasks import leaked_tasks

pytestmark = pytest.mark.asyncio

CHANNEL = "C0GOVERNOR"
BLOCKS: list[dict[str, Any]] = [
    {"type": "section", "text": {"type": "mrkdwn", "text": "*max_num_seqs* 256 → 192"}},
    {
        "type": "actions",
        "block_id": "approval.p1",
        "elements": [
            {
                "type": "button",
                "action_id": "approval.approve",
                "text": {"type": "plain_text", "text": "Approve"},
                "value": "p1:" + "a" * 64,
                "style": "primary",
            }
        ],
    },
]


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """slack-sdk honours HTTPS_PROXY and ignores NO_PROXY: loopback must not go through one."""
    unset_proxies(monkeypatch)


@pytest_asyncio.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves a task running (a Socket Mode client not closed, say)."""
    yield
    assert not await leaked_tasks()


@pytest_asyncio.fixture
async def double() -> AsyncIterator[SlackDouble]:
    """A running double."""
    async with SlackDouble(ack_deadline_s=3.0) as running:
        yield running


def web_client(double: SlackDouble, **kwargs: Any) -> AsyncWebClient:
    """The real async client pointed at the double (one aiohttp session per call: no leak)."""
    return AsyncWebClient(token=BOT_TOKEN, base_url=double.base_url, **kwargs)


@contextlib.asynccontextmanager
async def socket_mode(
    double: SlackDouble, *, ack: bool = True
) -> AsyncIterator[tuple[SocketModeClient, list[dict[str, Any]]]]:
    """A connected SocketModeClient that records every frame it reads and acks envelopes."""
    client = SocketModeClient(app_token=APP_TOKEN, web_client=web_client(double))
    frames: list[dict[str, Any]] = []

    async def record(
        _: AsyncBaseSocketModeClient, message: dict[str, Any], raw: str | None
    ) -> None:
        frames.append(message)

    async def acknowledge(client: AsyncBaseSocketModeClient, request: SocketModeRequest) -> None:
        # The SDK never acknowledges by itself: the governor must, within 3 s.
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))

    client.message_listeners.append(record)
    if ack:
        client.socket_mode_request_listeners.append(acknowledge)
    try:
        # connect() retries forever when apps.connections.open fails: bound it.
        await asyncio.wait_for(client.connect(), 10)  # type: ignore[no-untyped-call]
        yield client, frames
    finally:
        await client.close()  # type: ignore[no-untyped-call]


async def until(condition: Any, what: str, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


# Web API


async def test_auth_test_needs_the_bot_token(double: SlackDouble) -> None:
    answer = await web_client(double).auth_test()
    assert answer["user_id"] == "U0GOVERNOR"
    for token, error in [("xoxb-wrong", "invalid_auth"), (APP_TOKEN, "not_allowed_token_type")]:
        with pytest.raises(SlackApiError) as raised:
            await AsyncWebClient(token=token, base_url=double.base_url).auth_test()
        assert raised.value.response["error"] == error
    assert [call.token for call in double.calls_to("auth.test")] == [
        BOT_TOKEN,
        "xoxb-wrong",
        APP_TOKEN,
    ]


async def test_post_update_and_ephemeral_edit_the_stored_messages(double: SlackDouble) -> None:
    client = web_client(double)
    posted = await client.chat_postMessage(channel=CHANNEL, text="approval needed", blocks=BLOCKS)
    ts = posted["ts"]
    reply = await client.chat_postMessage(channel=CHANNEL, thread_ts=ts, text="applied")
    updated = await client.chat_update(channel=CHANNEL, ts=ts, text="approved", blocks=BLOCKS[:1])
    ephemeral = await client.chat_postEphemeral(channel=CHANNEL, user="U1", text="refused")

    message = double.message(CHANNEL, ts)
    assert updated["ts"] == ts
    assert (message.text, message.blocks) == ("approved", BLOCKS[:1])
    assert message.edits == [("approval needed", BLOCKS)]
    assert [m.ts for m in double.store.replies(CHANNEL, ts)] == [reply["ts"]]
    assert [(e.user, e.text) for e in double.store.ephemerals] == [("U1", "refused")]
    assert ephemeral["message_ts"] > ts
    post_call = double.calls_to("chat.postMessage")[0]
    assert post_call.content_type == "application/json"
    assert post_call.args["blocks"] == BLOCKS
    assert post_call.answer is not None
    assert post_call.answer["ok"] is True


async def test_slack_errors_surface_as_slack_api_errors(double: SlackDouble) -> None:
    client = web_client(double)
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("chat.update", {"channel": CHANNEL, "ts": "1.2", "text": "x"}, "message_not_found"),
        ("chat.postMessage", {"channel": "nope", "text": "x"}, "channel_not_found"),
        ("chat.postMessage", {"channel": CHANNEL}, "no_text"),
        (
            "chat.postMessage",
            {"channel": CHANNEL, "text": "x", "blocks": [{"type": "header"}]},
            "invalid_blocks",
        ),
        ("chat.postEphemeral", {"channel": CHANNEL, "text": "x"}, "user_not_in_channel"),
        ("users.list", {}, "unknown_method"),
    ]
    for method, args, error in cases:
        with pytest.raises(SlackApiError) as raised:
            await client.api_call(method, json=args)
        assert raised.value.response["error"] == error
    assert double.store.messages == {}


async def test_form_bodies_carry_the_token_and_json_strings_as_slack_accepts(
    double: SlackDouble,
) -> None:
    form = {"token": BOT_TOKEN, "channel": CHANNEL, "text": "hi", "blocks": json.dumps(BLOCKS)}
    async with aiohttp.ClientSession(trust_env=False) as session:
        async with session.post(double.base_url + "chat.postMessage", data=form) as answer:
            posted = await answer.json()
        # A JSON body's token is ignored, as Slack does: it must come in the header.
        body = {"token": BOT_TOKEN, "channel": CHANNEL, "text": "hi"}
        async with session.post(double.base_url + "chat.postMessage", json=body) as answer:
            refused = await answer.json()
    assert posted["ok"] is True
    assert double.message(CHANNEL, posted["ts"]).blocks == BLOCKS
    assert refused == {"ok": False, "error": "not_authed"}


async def test_429_is_retried_after_retry_after_by_the_rate_limit_handler(
    double: SlackDouble,
) -> None:
    double.fault("chat.postMessage", RateLimited(retry_after_s=1))
    client = web_client(double, retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)])
    await client.chat_postMessage(channel=CHANNEL, text="approval needed")
    first, second = double.calls_to("chat.postMessage")
    assert first.fault == "RateLimited"
    assert first.answer == {"ok": False, "error": "ratelimited"}
    assert second.at - first.at >= 1.0  # Retry-After honoured (plus up to 1 s of jitter)
    assert len(double.store.in_channel(CHANNEL)) == 1


async def test_429_without_the_handler_surfaces_with_retry_after(double: SlackDouble) -> None:
    double.fault("chat.update", RateLimited(retry_after_s=7))
    with pytest.raises(SlackApiError) as raised:
        await web_client(double).chat_update(channel=CHANNEL, ts="1.1", text="x")
    assert raised.value.response.status_code == 429
    assert raised.value.response.headers["Retry-After"] == "7"


async def test_500_surfaces_as_slack_api_error_and_posts_nothing(double: SlackDouble) -> None:
    double.fault("chat.postMessage", ServerError(500))
    client = web_client(double, retry_handlers=[AsyncRateLimitErrorRetryHandler()])
    with pytest.raises(SlackApiError) as raised:
        await client.chat_postMessage(channel=CHANNEL, text="approval needed")
    assert raised.value.response.status_code == 500
    assert double.store.messages == {}
    await client.chat_postMessage(channel=CHANNEL, text="approval needed")  # the fault was once
    assert len(double.store.messages) == 1


async def test_a_cut_connection_is_retried_once_by_the_default_handler(
    double: SlackDouble,
) -> None:
    double.fault("chat.postMessage", Drop())
    await web_client(double).chat_postMessage(channel=CHANNEL, text="approval needed")
    assert [call.fault for call in double.calls_to("chat.postMessage")] == ["Drop", None]
    assert len(double.store.messages) == 1


async def test_an_answer_lost_after_posting_makes_the_retry_a_duplicate(
    double: SlackDouble,
) -> None:
    # Why the governor must not blindly retry chat.postMessage on a connection error: Slack
    # may have posted already. It has to look for its own message before posting again.
    double.fault("chat.postMessage", Drop(after_processing=True))
    await web_client(double).chat_postMessage(channel=CHANNEL, text="approval needed")
    assert len(double.store.in_channel(CHANNEL)) == 2
    double.fault("chat.postMessage", Drop(after_processing=True))
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await web_client(double, retry_handlers=[]).chat_postMessage(channel=CHANNEL, text="x")
    assert len(double.store.in_channel(CHANNEL)) == 3


async def test_a_slow_answer_times_out_on_the_client(double: SlackDouble) -> None:
    double.fault("chat.update", Slow(5.0))
    with pytest.raises(asyncio.TimeoutError):
        await web_client(double, timeout=0.3).chat_update(channel=CHANNEL, ts="1.1", text="x")
    assert double.calls_to("chat.update")[0].fault == "Slow"


# Socket Mode


async def test_hello_envelope_ack_roundtrip(double: SlackDouble) -> None:
    client = web_client(double)
    posted = await client.chat_postMessage(channel=CHANNEL, text="approval needed", blocks=BLOCKS)
    async with socket_mode(double) as (_, frames):
        await until(lambda: any(f.get("type") == "hello" for f in frames), "hello")
        envelope = await double.press(CHANNEL, posted["ts"], "U0ALICE", "approval.approve")
        acked = await double.socket.wait_ack(envelope.envelope_id)
        await until(lambda: any("envelope_id" in f for f in frames), "the envelope")
    assert acked.acked_at is not None
    assert acked.acked_at - acked.sent_at < 3.0
    assert double.socket.late() == []
    received = next(f for f in frames if "envelope_id" in f)
    assert received["type"] == "interactive"
    assert read_press(received["payload"]) == Press(
        ButtonKind.APPROVE, "U0ALICE", "p1", "a" * 64, "1700001000.000001", CHANNEL, posted["ts"]
    )
    [connection] = double.socket.connections
    assert connection.closed_at is not None


async def test_disconnect_frame_makes_the_client_reconnect(double: SlackDouble) -> None:
    posted = await web_client(double).chat_postMessage(channel=CHANNEL, text="x", blocks=BLOCKS)
    async with socket_mode(double):
        await double.socket.wait_connections(1)
        await double.socket.disconnect("refresh_requested")
        await double.socket.wait_connections(2)
        await until(lambda: len(double.socket.open_connections) == 1, "the old socket to close")
        envelope = await double.press(CHANNEL, posted["ts"], "U0ALICE", "approval.approve")
        await double.socket.wait_ack(envelope.envelope_id)
    assert envelope.connection == 2
    assert len(double.calls_to("apps.connections.open")) == 2
    assert all(call.token == APP_TOKEN for call in double.calls_to("apps.connections.open"))


async def test_an_envelope_not_acked_in_time_is_flagged_and_redelivered(
    double: SlackDouble,
) -> None:
    double.socket.ack_deadline_s = 0.2  # Slack's 3 s, shortened to keep the test quick
    posted = await web_client(double).chat_postMessage(channel=CHANNEL, text="x", blocks=BLOCKS)
    async with socket_mode(double, ack=False) as (_, frames):
        await double.socket.wait_connections(1)
        envelope = await double.press(CHANNEL, posted["ts"], "U0ALICE", "approval.approve")
        await until(lambda: double.socket.late() == [envelope], "the envelope to be late")
        again = await double.socket.redeliver(envelope.envelope_id)
        await until(lambda: sum("envelope_id" in f for f in frames) == 2, "the redelivery")
    payloads = [f["payload"] for f in frames if "envelope_id" in f]
    assert payloads[0] == payloads[1]  # same click: the governor must see it as a replay
    assert again.retry_attempt == 1


async def test_connections_need_the_app_token_and_a_fresh_ticket(double: SlackDouble) -> None:
    with pytest.raises(SlackApiError) as raised:
        await web_client(double).apps_connections_open(app_token=BOT_TOKEN)
    assert raised.value.response["error"] == "not_allowed_token_type"
    answer = await web_client(double).apps_connections_open(app_token=APP_TOKEN)
    url = answer["url"]
    assert url.startswith(f"ws://127.0.0.1:{double.port}/link/?ticket=")
    async with aiohttp.ClientSession(trust_env=False) as session:
        async with session.ws_connect(url) as socket:
            hello = await socket.receive_json(timeout=5)
        with pytest.raises(aiohttp.WSServerHandshakeError):
            await session.ws_connect(url)  # tickets are single-use
    assert hello["type"] == "hello"
    assert double.socket.refused_tickets == 1


# HTTP interactivity


async def test_signed_posts_pass_the_verifier_once_and_tampered_ones_fail() -> None:
    secret = "8f742231b10e8888abcd99yyyzzz85a5"
    verifier = RequestVerifier(secret, SystemClock())
    seen: list[str] = []

    async def interactivity(request: web.Request) -> web.Response:
        body = await request.read()
        try:
            verifier.verify(body, dict(request.headers))
        except UnverifiedRequest as exc:
            return web.Response(status=401, text=exc.reason.value)
        form = dict(await request.post())
        seen.append(str(form["payload"]))
        return web.Response(text="")

    app = web.Application()
    app.router.add_post("/slack/interactivity", interactivity)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/interactivity"
    try:
        async with SlackDouble() as double:
            posted = await web_client(double).chat_postMessage(
                channel=CHANNEL, text="x", blocks=BLOCKS
            )
            message = double.message(CHANNEL, posted["ts"])
        payload = block_actions(message, "U0ALICE", "approval.approve", action_ts="1.000001")
        now = int(SystemClock().wall().timestamp())
        request = signed_request(payload, secret, now)
        tampered = request.body.replace(b"U0ALICE", b"U0MALLORY")
        forged = signed_request(payload, "not-the-secret", now)
        old = signed_request(payload, secret, now - 301)
        results = [
            await post(url, request),
            await post(url, request),  # the same request again: a replay
            await post(url, type(request)(tampered, request.headers)),
            await post(url, forged),
            await post(url, old),
        ]
    finally:
        await runner.cleanup()
    assert results == [
        (200, ""),
        (401, "replayed"),
        (401, "forged"),
        (401, "forged"),
        (401, "stale"),
    ]
    assert [json.loads(p)["user"]["id"] for p in seen] == ["U0ALICE"]
    assert urlencode({"payload": seen[0]}).encode() == request.body
