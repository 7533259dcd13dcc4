"""The HTTP interactivity transport: Slack posts each interaction to an endpoint we serve.

Anyone who can reach the endpoint can talk to it, so nothing is read that a stranger could make
large or slow (:mod:`~daemon.engine.approvals.slack.bounded_http` reads each request under
:class:`~daemon.engine.approvals.slack.bounded_http.Limits`):

- at most ``max_connections`` connections at once, so that a flood of slow connections holds
  a bounded amount of memory. At the cap, the oldest connection is dropped to make room for
  the new one (Slack's own requests arrive whole within milliseconds: the oldest is a slow
  one), so slow connections cannot keep Slack out; with ``evict_after_s`` set, one younger
  than that is kept and the new one is answered ``503`` and closed unread;
- the headers must arrive within ``header_timeout_s`` and the body within ``read_timeout_s``
  (``408``), or the connection is closed;
- the route, then Slack's timestamp, are checked from the headers alone: a request that is not
  a ``POST`` to ``[slack] http_path`` (``404``/``405``), or lacks the signature headers or is
  more than 5 minutes old (``401``) is refused before a byte of its body is read;
- the body must declare its length, at most ``max_body_bytes`` (``413`` before it is sent);
- then the request is verified (:class:`~daemon.approvals.signatures.RequestVerifier`: Slack's
  HMAC signature, the window, no replay of a signature already accepted; ``401``);
- a verified body that is not an interaction Slack sends, or whose JSON nests deeper than
  :data:`MAX_NESTING`, is ``400``.

A verified interaction is answered ``200`` at once and queued for the approval listener, well
within Slack's 3 s. Listen on loopback behind a TLS-terminating proxy that passes the body with
its ``Content-Length`` (nginx does by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

from daemon.approvals.errors import UnverifiedRequest
from daemon.approvals.signatures import RequestVerifier
from daemon.core.approval_settings import SlackSection
from daemon.core.clock import Clock
from daemon.core.json_nesting import nests_deeper_than
from daemon.engine.approvals.slack.bounded_http import (
    CONTINUE,
    DEFAULT_LIMITS,
    Limits,
    Refused,
    body_length,
    read_body,
    read_head,
    require_route,
    response,
)
from daemon.engine.approvals.slack.connection_cap import ConnectionCap

log = logging.getLogger(__name__)

Inbox = asyncio.Queue[tuple[str, dict[str, Any]]]
# Slack's payloads nest about ten levels (a message's rich text inside its blocks); far deeper is
# no interaction Slack sends, and would exhaust the parser's recursion.
MAX_NESTING = 64


async def serve_interactivity(
    section: SlackSection,
    signing_secret: str,
    clock: Clock,
    inbox: Inbox,
    on_listening: Callable[[int], None] = lambda _port: None,
    *,
    limits: Limits = DEFAULT_LIMITS,
) -> None:
    """Serve the endpoint until cancelled."""
    endpoint = _Endpoint(section.http_path, RequestVerifier(signing_secret, clock), inbox, limits)
    server = await asyncio.start_server(
        endpoint.connected,
        section.http_listen_host,
        section.http_listen_port,
        limit=limits.max_head_bytes,
    )
    async with server:
        port = int(server.sockets[0].getsockname()[1])
        log.info(
            "Slack interactivity endpoint listening",
            extra={"host": section.http_listen_host, "port": port, "path": section.http_path},
        )
        on_listening(port)
        try:
            await asyncio.Event().wait()
        finally:
            await endpoint.connections.drop_all()  # a slow peer must not hold the shutdown up


class _Endpoint:
    """What each connection is answered, under a cap on how many are served at once."""

    def __init__(self, path: str, verifier: RequestVerifier, inbox: Inbox, limits: Limits) -> None:
        self._path = path
        self._verifier = verifier
        self._inbox = inbox
        self._limits = limits
        self.connections = ConnectionCap(limits, "slack interactivity")

    async def connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer one connection's request, or refuse the connection when there are too many."""
        try:
            if not self.connections.admit(writer):
                busy = "too many connections; try again"
                writer.write(response(HTTPStatus.SERVICE_UNAVAILABLE, busy))
            else:
                with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
                    writer.write(await self._answer(reader, writer))
        finally:
            await self.connections.close(reader, writer)  # its place is given back, come what may

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        peer = writer.get_extra_info("peername")
        try:
            head = await read_head(reader, self._limits)
            require_route(head, "POST", self._path)
            self._verifier.check_headers(head.headers)
            length = body_length(head, self._limits)
            if head.expects_continue:
                writer.write(CONTINUE)
            body = await read_body(reader, length, self._limits)
            self._verifier.verify(body, head.headers)
        except UnverifiedRequest as exc:
            log.warning(
                "Slack request refused",
                extra={"reason": exc.reason.value, "error": str(exc), "peer": peer},
            )
            return response(HTTPStatus.UNAUTHORIZED, exc.reason.value)
        except Refused as exc:
            log.info("Slack endpoint refused a request", extra={"error": exc.reason, "peer": peer})
            return response(exc.status, exc.reason)
        received = _read(body)
        if received is None:
            return response(HTTPStatus.BAD_REQUEST, "not an interaction Slack sends")
        self._inbox.put_nowait(received)
        return response(HTTPStatus.OK, "")


def _read(body: bytes) -> tuple[str, dict[str, Any]] | None:
    """``interactive`` (a ``payload=`` JSON field) or ``slash_commands`` (form fields)."""
    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=False)
    except UnicodeDecodeError:
        return None
    if "payload" in form:
        text = form["payload"][0]
        if nests_deeper_than(text, MAX_NESTING):
            return None
        try:
            payload = json.loads(text)
        except json.JSONDecodeError:
            return None
        return ("interactive", payload) if isinstance(payload, dict) else None
    if "command" in form:
        return "slash_commands", {key: values[0] for key, values in form.items()}
    return None
