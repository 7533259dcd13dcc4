"""The Socket Mode side of the Slack double: a WebSocket that says ``hello``, pushes envelopes
and records the acknowledgements.

``apps.connections.open`` hands out a one-time ticket in the URL; a connection without a valid
ticket is refused, as Slack does. Slack expects each envelope to be acknowledged within 3 s
(it redelivers otherwise); the double records when each ack came, and :meth:`late` names the
envelopes that were not acknowledged in time.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web

ACK_DEADLINE_S = 3.0
PATH = "/link/"


@dataclass(slots=True)
class Envelope:
    """An envelope pushed to the client, and its acknowledgement."""

    envelope_id: str
    type: str
    payload: dict[str, Any]
    sent_at: float
    connection: int
    retry_attempt: int = 0
    acked_at: float | None = None
    ack_payload: dict[str, Any] | None = None


@dataclass(slots=True)
class Connection:
    """One WebSocket connection of the client."""

    number: int
    ticket: str
    opened_at: float
    closed_at: float | None = None


class SocketModeEndpoint:
    """The WebSocket endpoint; push envelopes with :meth:`push`, read acks in :attr:`envelopes`."""

    def __init__(
        self,
        base_ws_url: Callable[[], str],
        now: Callable[[], float],
        ack_deadline_s: float = ACK_DEADLINE_S,
    ) -> None:
        self._base_ws_url = base_ws_url
        self.ack_deadline_s = ack_deadline_s
        self._now = now
        self._tickets: set[str] = set()
        self._serial = itertools.count(1)
        self._sockets: dict[int, web.WebSocketResponse] = {}
        self._changed = asyncio.Condition()
        self.connections: list[Connection] = []
        self.envelopes: dict[str, Envelope] = {}
        self.unknown_acks: list[dict[str, Any]] = []
        self.refused_tickets = 0

    def issue_url(self) -> str:
        """A fresh ``ws://`` URL with a one-time ticket (what ``apps.connections.open`` gives)."""
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        return f"{self._base_ws_url()}{PATH}?ticket={ticket}"

    @property
    def open_connections(self) -> list[Connection]:
        """The connections not closed yet."""
        return [c for c in self.connections if c.closed_at is None]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The WebSocket handler: check the ticket, say hello, read acks until closed."""
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            self.refused_tickets += 1
            raise web.HTTPUnauthorized(text="invalid ticket")
        self._tickets.discard(ticket)
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        connection = Connection(next(self._serial), ticket, self._now())
        self.connections.append(connection)
        self._sockets[connection.number] = socket
        try:
            await socket.send_json(_hello(len(self.open_connections)))
            await self._notify()
            async for message in socket:
                if message.type is WSMsgType.TEXT:
                    await self._acked(json.loads(message.data))
        finally:
            connection.closed_at = self._now()
            self._sockets.pop(connection.number, None)
            await self._notify()
        return socket

    async def push(
        self, payload: dict[str, Any], kind: str = "interactive", *, retry_attempt: int = 0
    ) -> Envelope:
        """Send an envelope over the newest open connection; return it (ack not awaited)."""
        number, socket = self._newest()
        envelope = Envelope(uuid.uuid4().hex, kind, payload, self._now(), number, retry_attempt)
        self.envelopes[envelope.envelope_id] = envelope
        await socket.send_json(
            {
                "envelope_id": envelope.envelope_id,
                "payload": payload,
                "type": kind,
                "accepts_response_payload": False,
                "retry_attempt": retry_attempt,
                "retry_reason": "timeout" if retry_attempt else "",
            }
        )
        return envelope

    async def redeliver(self, envelope_id: str) -> Envelope:
        """Send an envelope again, as Slack does when no ack came in time (same payload)."""
        earlier = self.envelopes[envelope_id]
        return await self.push(
            earlier.payload, earlier.type, retry_attempt=earlier.retry_attempt + 1
        )

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Send a ``disconnect`` frame on the newest connection; the client should reconnect."""
        _, socket = self._newest()
        await socket.send_json({"type": "disconnect", "reason": reason, "debug_info": {}})

    async def wait_connections(self, count: int, timeout_s: float = 10.0) -> None:
        """Wait until ``count`` connections were opened in all."""
        await self._wait(lambda: len(self.connections) >= count, timeout_s)

    async def wait_ack(self, envelope_id: str, timeout_s: float = 10.0) -> Envelope:
        """Wait for the ack of an envelope; return the envelope."""
        envelope = self.envelopes[envelope_id]
        await self._wait(lambda: envelope.acked_at is not None, timeout_s)
        return envelope

    def late(self) -> list[Envelope]:
        """Envelopes not acknowledged within the deadline (3 s, Slack's) of being sent."""
        now = self._now()
        return [
            e
            for e in self.envelopes.values()
            if (e.acked_at if e.acked_at is not None else now) - e.sent_at > self.ack_deadline_s
        ]

    async def close_all(self) -> None:
        """Close every connection (the double is shutting down)."""
        for socket in list(self._sockets.values()):
            await socket.close()

    def _newest(self) -> tuple[int, web.WebSocketResponse]:
        if not self._sockets:
            message = "no Socket Mode client is connected"
            raise AssertionError(message)
        number = max(self._sockets)
        return number, self._sockets[number]

    async def _acked(self, message: dict[str, Any]) -> None:
        envelope = self.envelopes.get(str(message.get("envelope_id", "")))
        if envelope is None or envelope.acked_at is not None:
            self.unknown_acks.append(message)
        else:
            envelope.acked_at = self._now()
            envelope.ack_payload = message.get("payload")
        await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _wait(self, condition: Callable[[], bool], timeout_s: float) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(condition), timeout_s)


def _hello(connections: int) -> dict[str, Any]:
    return {
        "type": "hello",
        "num_connections": connections,
        "debug_info": {"host": "double", "approximate_connection_time": 18060},
        "connection_info": {"app_id": "A0DOUBLE"},
    }
