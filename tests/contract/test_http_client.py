"""The daemon's HTTP client against real loopback servers, well-behaved and hostile.

Every failure must come within its deadline, with its kind and a sentence that says what
happened, and must leave no connection open at the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from daemon.core.errors import HttpExchangeError
from daemon.core.http_client import (
    CLOSED,
    INVALID,
    MALFORMED,
    OVERSIZED,
    REFUSED,
    TIMEOUT,
    UNREACHABLE,
    HttpLimits,
    HttpResponse,
    http_request,
)
from tests.support.hostile_metrics import (
    Behaviour,
    HostileServer,
    answer,
    endless,
    ok_head,
    read_request,
    reset_after,
    trickle,
)
from tests.support.services import free_port

pytestmark = pytest.mark.asyncio

# Slack for a loaded two-core machine: a deadline may be late by this much, never more.
SLACK_S = 0.4


async def _get(server: HostileServer, limits: HttpLimits, path: str = "/metrics") -> HttpResponse:
    return await http_request("GET", server.base_url + path, limits)


async def _failure(server: HostileServer, limits: HttpLimits) -> tuple[HttpExchangeError, float]:
    """The error of a GET, and how long it took to come."""
    started = time.monotonic()
    with pytest.raises(HttpExchangeError) as caught:
        await _get(server, limits)
    return caught.value, time.monotonic() - started


async def _nothing_left_open(server: HostileServer) -> None:
    """The server saw the client's end of every connection close."""
    for _ in range(50):
        if server.in_flight == 0:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{server.in_flight} connection(s) still open at the server")


@contextlib.contextmanager
def _serving(behaviour: Behaviour) -> Iterator[HostileServer]:
    with HostileServer(behaviour) as server:
        yield server


# Answers that are fine.


async def test_a_content_length_answer_and_the_request_the_server_saw() -> None:
    seen: list[bytes] = []

    def capture(conn: socket.socket, stop: threading.Event) -> None:
        seen.append(read_request(conn))
        conn.sendall(ok_head(4) + b"m 1\n")

    with _serving(capture) as server:
        response = await _get(server, HttpLimits(total_s=2), path="/metrics?x=1")
    assert (response.status, response.body) == (200, b"m 1\n")
    assert response.header("Content-Type") == "text/plain; version=0.0.4"
    request = seen[0].decode()
    assert request.startswith("GET /metrics?x=1 HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.port}\r\n" in request
    assert "Connection: close\r\n" in request
    assert "accept:" not in request.lower(), "vLLM rewrites its names for an OpenMetrics Accept"
    assert "content-length" not in request.lower()


async def test_a_chunked_answer_with_extensions_and_trailers_is_decoded() -> None:
    chunks = b"4;name=x\r\nm 1\n\r\n6\r\nm2 22\n\r\n0\r\nX-Trailer: t\r\n\r\n"
    with _serving(answer(ok_head(chunked=True) + chunks, then_hold=True)) as server:
        response = await _get(server, HttpLimits(total_s=2))
    assert response.body == b"m 1\nm2 22\n"


async def test_a_body_without_length_is_read_to_the_end_and_1xx_answers_are_skipped() -> None:
    raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 503 Service Unavailable\r\n\r\nbusy"
    with _serving(answer(raw)) as server:
        response = await _get(server, HttpLimits(total_s=2))
    assert (response.status, response.body) == (503, b"busy")


async def test_a_post_carries_its_body_and_length() -> None:
    seen: list[bytes] = []

    def capture(conn: socket.socket, stop: threading.Event) -> None:
        data = read_request(conn)
        while not data.endswith(b"level=info"):
            data += conn.recv(100)
        seen.extend(data.split(b"\r\n\r\n", 1))
        conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")

    with _serving(capture) as server:
        response = await http_request(
            "POST",
            server.base_url + "/logging?level=info",
            HttpLimits(total_s=2),
            body=b"level=info",
            headers={"Content-Type": "text/plain"},
        )
    assert (response.status, response.body) == (204, b"")
    assert "\r\nContent-Length: 10" in seen[0].decode()
    assert "\r\nContent-Type: text/plain\r\n" in seen[0].decode()
    assert seen[1] == b"level=info"


# Slow servers: the deadline ends the exchange and closes the connection.


async def test_slow_headers_end_at_the_total_deadline() -> None:
    page = b"m 1\n" * 10
    slowloris = trickle(ok_head(len(page)), page, bytes_per_s=20, slow_head=True)
    with _serving(slowloris) as server:
        error, took = await _failure(server, HttpLimits(total_s=0.3))
        await _nothing_left_open(server)
    assert error.kind == TIMEOUT
    assert "no complete answer within 0.3 s (waiting for the head)" in str(error)
    assert 0.3 <= took < 0.3 + SLACK_S


async def test_a_slow_body_ends_at_the_total_deadline_though_every_read_is_quick() -> None:
    page = b"m 1\n" * 100
    with _serving(trickle(ok_head(len(page)), page, bytes_per_s=50)) as server:
        error, took = await _failure(server, HttpLimits(total_s=0.5, read_s=0.2))
        await _nothing_left_open(server)
    assert error.kind == TIMEOUT
    assert "no complete answer within 0.5 s (reading the body)" in str(error)
    assert 0.5 <= took < 0.5 + SLACK_S


async def test_a_stalled_body_ends_at_the_per_read_deadline() -> None:
    with _serving(answer(ok_head(100) + b"m 1\n", then_hold=True)) as server:
        error, took = await _failure(server, HttpLimits(total_s=5, read_s=0.2))
        await _nothing_left_open(server)
    assert error.kind == TIMEOUT
    assert "nothing from the server for 0.2 s (reading the body)" in str(error)
    assert 0.2 <= took < 0.2 + SLACK_S


async def test_a_cancelled_exchange_closes_its_connection_at_once() -> None:
    page = b"m 1\n" * 100
    with _serving(trickle(ok_head(len(page)), page, bytes_per_s=10)) as server:
        task = asyncio.ensure_future(_get(server, HttpLimits(total_s=30)))
        await asyncio.sleep(0.3)
        assert server.in_flight == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await _nothing_left_open(server)


# Too large.


async def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    with _serving(answer(ok_head(10 << 20), then_hold=True)) as server:
        error, took = await _failure(server, HttpLimits(total_s=2, max_body_bytes=1 << 20))
        await _nothing_left_open(server)
    assert error.kind == OVERSIZED
    assert f"body larger than {1 << 20} bytes" in str(error)
    assert took < SLACK_S


@pytest.mark.parametrize(
    "behaviour",
    [
        pytest.param(
            endless(ok_head(chunked=True), b"8000\r\n" + b"x" * 0x8000 + b"\r\n"), id="chunked"
        ),
        pytest.param(endless(b"HTTP/1.1 200 OK\r\n\r\n", b"x" * 65536), id="to-the-end"),
    ],
)
async def test_an_endless_body_stops_at_the_limit(behaviour: Behaviour) -> None:
    with _serving(behaviour) as server:
        error, took = await _failure(server, HttpLimits(total_s=5, max_body_bytes=1 << 20))
        await _nothing_left_open(server)
    assert error.kind == OVERSIZED
    assert took < 1.0


async def test_endless_headers_stop_at_the_head_limit() -> None:
    head = b"HTTP/1.1 200 OK\r\n"
    with _serving(endless(head, b"X-Padding: " + b"y" * 1000 + b"\r\n")) as server:
        error, _ = await _failure(server, HttpLimits(total_s=5, max_head_bytes=16 << 10))
        await _nothing_left_open(server)
    assert error.kind == OVERSIZED
    assert "head larger than 16384 bytes" in str(error)


# No answer, or a broken one.


async def test_connection_refused_is_told_apart() -> None:
    for host in ("127.0.0.1", "localhost"):
        started = time.monotonic()
        with pytest.raises(HttpExchangeError) as caught:
            await http_request("GET", f"http://{host}:{free_port()}/", HttpLimits(total_s=2))
        assert caught.value.kind == REFUSED, caught.value
        assert "connection refused" in str(caught.value)
        assert time.monotonic() - started < SLACK_S


async def test_a_reset_mid_body_is_a_closed_connection() -> None:
    with _serving(reset_after(ok_head(1000) + b"m 1\n")) as server:
        error, took = await _failure(server, HttpLimits(total_s=2))
    assert error.kind == CLOSED
    assert "connection cut off" in str(error)
    assert took < SLACK_S


async def test_an_answer_shorter_than_its_length_is_a_closed_connection() -> None:
    with _serving(answer(ok_head(1000) + b"m 1\n")) as server:
        error, _ = await _failure(server, HttpLimits(total_s=2))
    assert error.kind == CLOSED
    assert "4 bytes read on a total of 1000 expected bytes" in str(error)


async def test_a_connection_closed_before_answering() -> None:
    with _serving(answer(b"")) as server:
        error, _ = await _failure(server, HttpLimits(total_s=2))
    assert error.kind == CLOSED
    assert "connection closed without a byte, before the head ended" in str(error)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not an HTTP/1.x status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "not a header line"),
        (ok_head(chunked=True) + b"zz\r\n", "not a chunk size"),
        (ok_head(chunked=True) + b"2\r\nabcd", "not followed by CRLF"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
            "bad Content-Length",
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "unsupported transfer coding",
        ),
    ],
)
async def test_malformed_answers_say_what_is_wrong(raw: bytes, says: str) -> None:
    with _serving(answer(raw, then_hold=True)) as server:
        error, _ = await _failure(server, HttpLimits(total_s=2))
        await _nothing_left_open(server)
    assert error.kind == MALFORMED
    assert says in str(error)


async def test_tls_to_a_plain_server_is_unreachable() -> None:
    def plain(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")  # to a TLS ClientHello

    with _serving(plain) as server:
        url = server.base_url.replace("http://", "https://")
        with pytest.raises(HttpExchangeError) as caught:
            await http_request("GET", url, HttpLimits(total_s=2))
    assert caught.value.kind == UNREACHABLE


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        ("file:///etc/passwd", {}),
        ("http:///no-host", {}),
        ("http://127.0.0.1:99999/", {}),
        ("http://127.0.0.1/a b", {}),
        ("http://127.0.0.1/", {"X-Injected": "a\r\nHost: elsewhere"}),
    ],
)
async def test_requests_that_cannot_be_sent_are_refused_before_connecting(
    url: str, headers: dict[str, str]
) -> None:
    with pytest.raises(HttpExchangeError) as caught:
        await http_request("GET", url, HttpLimits(total_s=1), headers=headers)
    assert caught.value.kind == INVALID
