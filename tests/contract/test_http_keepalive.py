"""A source's exchanges over one kept-alive connection, against real loopback servers.

The connection is kept only after a clean, framed HTTP/1.1 answer; one the server closed while
idle is replaced without the caller seeing it; a failed exchange still closes it at once.
"""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from daemon.core.errors import HttpExchangeError
from daemon.core.http_client import TIMEOUT, HttpLimits
from daemon.core.http_keepalive import KeptAliveExchanges
from tests.support.hostile_metrics import (
    Behaviour,
    HostileServer,
    answer,
    ok_head,
    read_request,
    trickle,
)

pytestmark = pytest.mark.asyncio

PAGE = b"vllm:num_requests_running 1.0\n"
LIMITS = HttpLimits(total_s=5)


def keep_answering(answers: int | None = None) -> Behaviour:
    """Answer each request on the connection with PAGE; after ``answers`` of them, hang up."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        served = 0
        while not stop.is_set() and read_request(conn):
            if answers is not None and served == answers:
                return  # the request is read, and the connection closed unanswered
            conn.sendall(ok_head(len(PAGE)) + PAGE)
            served += 1

    return behave


async def _closed_at_the_server(server: HostileServer) -> None:
    for _ in range(50):
        if server.in_flight == 0:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{server.in_flight} connection(s) still open at the server")


async def test_exchanges_go_over_the_connection_the_first_one_left_open() -> None:
    with HostileServer(keep_answering()) as server:
        exchanges = KeptAliveExchanges()
        try:
            for path in ("/metrics", "/health", "/metrics"):
                response = await exchanges("GET", server.base_url + path, LIMITS)
                assert (response.status, response.body) == (200, PAGE)
            assert exchanges.keeps_a_connection()
            assert server.connections == 1
        finally:
            exchanges.close()
        await _closed_at_the_server(server)


async def test_a_connection_the_server_closed_between_exchanges_is_replaced() -> None:
    # Each connection answers one request, then reads the next and hangs up on it: the second
    # GET finds its kept connection closed under it and is sent again on a new one.
    with HostileServer(keep_answering(answers=1)) as server:
        exchanges = KeptAliveExchanges()
        try:
            for _ in range(3):
                response = await exchanges("GET", server.base_url + "/metrics", LIMITS)
                assert response.body == PAGE
            assert server.connections == 3
        finally:
            exchanges.close()


@pytest.mark.parametrize(
    ("raw", "then_hold"),
    [
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", True),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", True),
        (b"HTTP/1.1 200 OK\r\n\r\nok", False),  # the body ends with the connection
    ],
    ids=["connection-close", "http-1.0", "body-to-the-end"],
)
async def test_a_connection_the_answer_does_not_leave_reusable_is_closed(
    raw: bytes, then_hold: bool
) -> None:
    with HostileServer(answer(raw, then_hold=then_hold)) as server:
        exchanges = KeptAliveExchanges()
        response = await exchanges("GET", server.base_url + "/metrics", LIMITS)
        assert response.body == b"ok"
        assert not exchanges.keeps_a_connection()
        await _closed_at_the_server(server)


async def test_a_timed_out_exchange_closes_the_kept_connection() -> None:
    slow = trickle(ok_head(len(PAGE)), PAGE, bytes_per_s=2)
    served: list[Behaviour] = [keep_answering(answers=1), slow]

    def first_fast_then_slow(conn: socket.socket, stop: threading.Event) -> None:
        served.pop(0)(conn, stop)

    with HostileServer(first_fast_then_slow) as server:
        exchanges = KeptAliveExchanges()
        await exchanges("GET", server.base_url + "/metrics", LIMITS)
        assert exchanges.keeps_a_connection()
        # The kept connection hangs up on the second request; its retry meets the slow one.
        with pytest.raises(HttpExchangeError) as caught:
            await exchanges("GET", server.base_url + "/metrics", HttpLimits(total_s=0.5))
        assert caught.value.kind == TIMEOUT
        assert not exchanges.keeps_a_connection()
        await _closed_at_the_server(server)
