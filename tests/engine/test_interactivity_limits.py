"""The HTTP interactivity endpoint under hostile clients (issue 15, finding 6).

The real endpoint on a loopback port, talked to over raw sockets so that a client can stop
mid-request: slow headers, slow bodies, more connections than the cap, a stale or missing
timestamp with the body held back, a declared body over the cap, and a signed body whose JSON
nests too deep. Every wait is bounded by :data:`NO_ANSWER_S`, which only turns a hang (what the
endpoint did before) into a failure; it measures nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest

from daemon.core.approval_settings import SlackSection
from daemon.core.clock import SystemClock
from daemon.engine.approvals.slack.bounded_http import Limits
from daemon.engine.approvals.slack.slack_http import Inbox, serve_interactivity
from tests.support.slack_double import post, signed_request
from tests.support.slack_double.interactivity import SignedRequest, signature
from tests.support.tasks import eventually, running

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
PATH = "/slack/interactivity"
NO_ANSWER_S = 20.0
# Short timeouts so that a slow client is cut off quickly; the cap small enough to exceed; no
# connection old enough to give way to a new one within the test.
LIMITS = Limits(max_connections=6, header_timeout_s=2.0, read_timeout_s=3.0, evict_after_s=60)
CLICK = {"type": "block_actions", "user": {"id": "U0ALICE"}, "actions": []}


@dataclass
class Endpoint:
    """A running endpoint: where it listens and what it queued."""

    port: int
    inbox: Inbox

    @property
    def url(self) -> str:
        """Where Slack would post."""
        return f"http://127.0.0.1:{self.port}{PATH}"


@contextlib.asynccontextmanager
async def endpoint(limits: Limits | None = None) -> AsyncIterator[Endpoint]:
    """The real interactivity endpoint on a free loopback port, for the span of the block."""
    section = SlackSection(transport="http", http_listen_port=0, http_path=PATH)
    inbox: Inbox = asyncio.Queue()
    ports: list[int] = []
    serving = serve_interactivity(
        section, SECRET, SystemClock(), inbox, ports.append, **_limits(limits)
    )
    async with running(serving, "interactivity endpoint") as task:
        await eventually(lambda: bool(ports), "the endpoint listening", task=task)
        yield Endpoint(ports[0], inbox)


def _limits(limits: Limits | None) -> dict[str, Limits]:
    return {} if limits is None else {"limits": limits}


def head(length: int, timestamp: int | None, **extra: str) -> bytes:
    """A POST's head to the endpoint, with Slack's headers (a signature of nothing)."""
    lines = [f"POST {PATH} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {length}"]
    lines.append("Content-Type: application/x-www-form-urlencoded")
    if timestamp is not None:
        lines.append(f"X-Slack-Request-Timestamp: {timestamp}")
        lines.append(f"X-Slack-Signature: {signature(SECRET, timestamp, b'')}")
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in extra.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw connection to the endpoint."""
    return await asyncio.open_connection("127.0.0.1", port)


async def answer(reader: asyncio.StreamReader) -> tuple[int, str]:
    """The status and body of the endpoint's answer (its ``Content-Length`` bytes)."""
    async with asyncio.timeout(NO_ANSWER_S):
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status_line, *lines = head.split("\r\n")
        fields = dict(line.lower().split(": ", 1) for line in lines if line)
        body = await reader.readexactly(int(fields.get("content-length", "0")))
    return int(status_line.split(" ")[1]), body.decode()


async def unanswered(reader: asyncio.StreamReader) -> bool:
    """Whether the endpoint closed this connection without a word (closed or reset)."""
    try:
        async with asyncio.timeout(NO_ANSWER_S):
            return await reader.read() == b""
    except ConnectionResetError:
        return True


async def exchange(port: int, data: bytes) -> tuple[int, str]:
    """Send ``data`` (and nothing after it) on a fresh connection; the answer."""
    reader, writer = await connect(port)
    try:
        writer.write(data)
        return await answer(reader)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [(None, (401, "malformed")), (int(time.time()) - 3600, (401, "stale"))],
    ids=["no timestamp", "an hour old"],
)
async def test_a_request_that_cannot_verify_is_refused_before_its_body(
    timestamp: int | None, expected: tuple[int, str]
) -> None:
    # The head promises 200 KB; not a byte of it is ever sent, and the answer still comes.
    async with endpoint() as served:
        assert await exchange(served.port, head(200_000, timestamp)) == expected


@pytest.mark.asyncio
async def test_a_body_over_the_cap_or_without_a_length_is_refused_before_it_is_sent() -> None:
    now = int(time.time())
    async with endpoint() as served:
        oversized = await exchange(served.port, head(10 * 1024 * 1024, now))
        chunked = head(0, now, Transfer_Encoding="chunked").replace(b"Content-Length: 0\r\n", b"")
        unmeasured = await exchange(served.port, chunked)
        gzipped = await exchange(served.port, head(100, now, Content_Encoding="gzip"))
    assert oversized == (413, f"a body is at most {256 * 1024} bytes")
    assert unmeasured == (411, "a body needs a Content-Length")
    assert gzipped == (415, "a body must not be encoded")


@pytest.mark.asyncio
async def test_a_signed_body_nested_too_deep_is_a_400_not_a_500() -> None:
    deep = '{"type":"block_actions","x":' + "[" * 20_000 + "]" * 20_000 + "}"
    body = urlencode({"payload": deep}).encode()
    now = int(time.time())
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": str(now),
        "X-Slack-Signature": signature(SECRET, now, body),
    }
    async with endpoint() as served:
        refused = await post(served.url, SignedRequest(body, headers))
        # A genuine click after it is still taken: the endpoint is unharmed.
        accepted = await post(served.url, signed_request(CLICK, SECRET, now))
        assert served.inbox.get_nowait() == ("interactive", CLICK)
    assert refused == (400, "not an interaction Slack sends")
    assert accepted == (200, "")


@pytest.mark.asyncio
async def test_slow_connections_are_capped_and_cut_off_and_the_endpoint_serves_on() -> None:
    now = int(time.time())
    async with endpoint(LIMITS) as served:
        slow = [await connect(served.port) for _ in range(LIMITS.max_connections)]
        for number, (_, writer) in enumerate(slow):
            # Half trickle their headers (a line and no more), half their 250 KB body.
            writer.write(b"POST " if number % 2 else head(250_000, now) + b"payload=")
            await writer.drain()
        beyond = [await exchange(served.port, head(10, now)) for _ in range(3)]
        cut_off = [await answer(reader) for reader, _ in slow]
        for _, writer in slow:
            writer.close()
        after = await post(served.url, signed_request(CLICK, SECRET, now))
    assert beyond == [(503, "too many connections; try again")] * 3
    assert (
        sorted(cut_off)
        == [(408, "the body did not arrive in time")] * 3
        + [(408, "the headers did not arrive in time")] * 3
    )
    assert after == (200, "")


@pytest.mark.asyncio
async def test_at_the_cap_the_oldest_slow_connection_gives_way_to_slack() -> None:
    # Every connection is old enough to give way at once: the cap cannot keep Slack out.
    limits = Limits(max_connections=4, header_timeout_s=60, read_timeout_s=60, evict_after_s=0)
    async with endpoint(limits) as served:
        slow = [await connect(served.port) for _ in range(limits.max_connections)]
        for _, writer in slow:
            writer.write(b"POST ")
            await writer.drain()
        clicked = await post(served.url, signed_request(CLICK, SECRET, int(time.time())))
        evicted = await unanswered(slow[0][0])
        for _, writer in slow:
            writer.close()
    assert clicked == (200, "")
    assert evicted


@pytest.mark.asyncio
async def test_a_client_that_waits_for_100_continue_gets_it_and_is_served() -> None:
    request = signed_request(CLICK, SECRET, int(time.time()))
    lines = [f"POST {PATH} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(request.body)}"]
    lines += [f"{name}: {value}" for name, value in request.headers.items()]
    lines.append("Expect: 100-continue")
    async with endpoint() as served:
        reader, writer = await connect(served.port)
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        async with asyncio.timeout(NO_ANSWER_S):
            interim = await reader.readuntil(b"\r\n\r\n")
        writer.write(request.body)
        final = await answer(reader)
        writer.close()
        await writer.wait_closed()
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert final == (200, "")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("request_line", "expected"),
    [
        (f"GET {PATH} HTTP/1.1", (405, "only POST")),
        ("POST /elsewhere HTTP/1.1", (404, "not found")),
        ("POST /slack/interactivity", (400, "not an HTTP/1.x request")),
    ],
)
async def test_the_route_is_checked_from_the_head(
    request_line: str, expected: tuple[int, str]
) -> None:
    async with endpoint() as served:
        assert (
            await exchange(served.port, f"{request_line}\r\nHost: x\r\n\r\n".encode()) == expected
        )
