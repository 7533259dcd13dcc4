"""How many connections an endpoint serves at once, and how it lets them go.

A connection is *reading* while its request is read and answered (at most
:attr:`~daemon.engine.approvals.slack.bounded_http.Limits.max_connections` of them: what bounds
the memory slow peers can hold), then *closing* while the answer goes out (at most as many
again, each for at most :data:`LINGER_S`). At the cap, the oldest reading connection gives its
place to a new one once it has been open ``evict_after_s``: the endpoint's genuine peer (Slack)
sends its request at once, so the oldest connection at the cap is a slow one, and slow peers
cannot keep the genuine one out. A connection with no place is refused (the caller answers it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, TypeAlias

from daemon.engine.approvals.slack.bounded_http import Limits

log = logging.getLogger(__name__)

LINGER_S = 1.0  # for the answer to go out, and the peer to close, after a request
_DRAIN_CHUNK = 64 * 1024

_Handler: TypeAlias = asyncio.Task[Any] | None


class ConnectionCap:
    """The reading and closing connections of one endpoint, each set capped."""

    def __init__(self, limits: Limits, name: str) -> None:
        self._limits = limits
        self._name = name
        # Each connection's handler, and (reading) when it opened; the oldest first.
        self._reading: dict[asyncio.StreamWriter, tuple[_Handler, float]] = {}
        self._closing: dict[asyncio.StreamWriter, _Handler] = {}
        self._at_cap = False  # to log reaching the cap once, not once a connection

    def admit(self, writer: asyncio.StreamWriter) -> bool:
        """Take ``writer``'s connection as reading, making room if the oldest is old enough."""
        now = asyncio.get_running_loop().time()
        if len(self._reading) >= self._limits.max_connections:
            oldest, (_handler, opened_at) = next(iter(self._reading.items()))
            self._note_cap(reached=True)
            if now - opened_at < self._limits.evict_after_s:
                return False
            oldest.transport.abort()  # its handler ends on the closed stream
            self._forget(oldest)
        self._reading[writer] = (asyncio.current_task(), now)
        return True

    async def close(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Send what was written, then close without losing it, within :data:`LINGER_S`.

        A peer may still be sending what was not read (a body refused from its head). Closing
        a socket with unread bytes resets the connection, and the peer's system may then drop
        the answer it had received; so the write side is shut first, and what arrives is read
        and dropped until the peer closes too or the time is up.
        """
        self._forget(writer)
        if len(self._closing) >= self._limits.max_connections:
            # A flood: even the short wait of a polite close is more than can be given to all.
            writer.transport.abort()
            return
        self._closing[writer] = asyncio.current_task()
        try:
            await _linger(reader, writer)
        finally:
            del self._closing[writer]

    async def drop_all(self) -> None:
        """Abort every connection and let their handlers end on the closed streams."""
        reading = [handler for handler, _opened_at in self._reading.values()]
        handlers = {handler for handler in [*reading, *self._closing.values()] if handler}
        for writer in [*self._reading, *self._closing]:
            writer.transport.abort()
        if handlers:
            await asyncio.wait(handlers, timeout=LINGER_S)

    def _forget(self, writer: asyncio.StreamWriter) -> None:
        if self._reading.pop(writer, None) is None:
            return  # not reading (refused, or evicted already)
        if self._at_cap and len(self._reading) <= self._limits.max_connections // 2:
            self._note_cap(reached=False)

    def _note_cap(self, *, reached: bool) -> None:
        if reached == self._at_cap:
            return
        self._at_cap = reached
        if reached:
            log.warning(
                "connection cap reached: the oldest connections give way, or new ones are refused",
                extra={"endpoint": self._name, "max_connections": self._limits.max_connections},
            )
        else:
            log.info("below the connection cap again", extra={"endpoint": self._name})


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    closed_in_time = False
    with contextlib.suppress(ConnectionError, TimeoutError):
        async with asyncio.timeout(LINGER_S):
            await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
            while await reader.read(_DRAIN_CHUNK):
                pass
            closed_in_time = True
    if not closed_in_time:
        writer.transport.abort()
        return
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
