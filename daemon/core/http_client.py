"""The daemon's HTTP client: one HTTP/1.1 exchange on asyncio streams, bounded in time and size.

Every exchange has its own deadlines and really ends at them. ``total_s`` bounds the whole of
it (connecting, TLS, sending, the head, the body); ``read_s``, when given, bounds each single
wait for the server. At a deadline, or when the awaiting task is cancelled (a poll's own
timeout, the daemon stopping), the socket is aborted there and then: nothing of an exchange
outlives its ``await``, so a server that trickles its answer a byte a second costs one socket
for ``total_s`` and nothing after it.

Why not the standard library's client in a worker thread, as before: its timeout is per
``recv``, so a trickled page never times out, and a thread cannot be stopped; every abandoned
scrape kept a thread of the pool all scrapes shared, and one slow target blinded the daemon to
every other (issue 15, finding 1). Why not aiohttp: about 8 MB in an idle daemon, for a GET
every few seconds. Only resolving a host *name* uses a thread, one of its own and one at a time
per name (:mod:`daemon.core.name_lookups`); IP literals, ``127.0.0.1`` and ``[::1]`` included,
never do.

Answers are read with ``Connection: close``: a ``Content-Length`` body, a chunked body (its
trailers read and dropped) or a body up to the end of the connection, at most
``max_body_bytes`` of it, and a head of at most ``max_head_bytes``. A caller that talks to one
server again and again (a scrape every 2 s) may keep the connection instead
(:func:`http_request_kept`, :mod:`daemon.core.http_keepalive`): it stays open only after an
HTTP/1.1 answer that was framed, read whole and did not ask to close, and an exchange that
fails or is cancelled still aborts it there and then. No ``Accept`` header is
sent (an OpenMetrics ``Accept`` may make vLLM rewrite its ``vllm:`` names) and the body is
asked for as is (``Accept-Encoding: identity``). Proxies are never used: the servers talked to
this way sit on this host, and an ``http_proxy`` variable must not send their traffic
elsewhere. TLS (``https``) is verified against the system's CAs.

Every failure is an :class:`~daemon.core.errors.HttpExchangeError` whose ``kind`` is one of
:data:`REFUSED`, :data:`UNREACHABLE`, :data:`TIMEOUT`, :data:`CLOSED`, :data:`MALFORMED`,
:data:`OVERSIZED` or :data:`INVALID`; an answer with any status is an answer, not a failure.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import ssl
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar
from urllib.parse import urlsplit

from daemon.core.errors import HttpExchangeError
from daemon.core.http_bodies import BodyReader, Head, Malformed, Oversized, framed, parse_head
from daemon.core.name_lookups import addresses_of
from daemon.core.secret_patterns import without_userinfo
from daemon.core.version import __version__

T = TypeVar("T")

REFUSED = "refused"  # nothing listens there: every address refused the connection
UNREACHABLE = "unreachable"  # the name does not resolve, no route, TLS failed
TIMEOUT = "timeout"  # a deadline passed; the connection was closed there
CLOSED = "closed"  # the server closed or reset the connection before the answer ended
MALFORMED = "malformed"  # what came back is not HTTP/1.x, or its framing is broken
OVERSIZED = "oversized"  # the head or the body is larger than allowed
INVALID = "invalid"  # the request itself cannot be sent (URL, header values)

_BODYLESS_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
# Sent again on a new connection when a kept one turns out closed: asking twice changes nothing.
_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The bounds of one exchange.

    Attributes:
        total_s: The whole exchange, from connecting to the last byte of the body.
        read_s: The longest single wait for the server; None: only ``total_s`` applies.
        max_body_bytes: The largest body accepted (decoded size of a chunked one).
        max_head_bytes: The largest status line plus headers accepted.
    """

    total_s: float
    read_s: float | None = None
    max_body_bytes: int = 32 << 20
    max_head_bytes: int = 64 << 10


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """Status, headers (names in lower case, in order) and body of one answer."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (any case), or None."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), None)


class HttpExchange(Protocol):
    """What sends one request and returns its answer: :func:`http_request`, or a stand-in.

    The seam where a simulation puts an in-process server in place of the network (as httpx's
    transport is): the batch lane sends its requests through one of these.
    """

    async def __call__(
        self,
        method: str,
        url: str,
        limits: HttpLimits,
        *,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> HttpResponse:
        """One exchange within ``limits``.

        Raises:
            HttpExchangeError: no usable answer; ``kind`` says why.
        """
        ...


async def http_request(
    method: str,
    url: str,
    limits: HttpLimits,
    *,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
) -> HttpResponse:
    """One exchange with the server of ``url``, within ``limits``.

    Raises:
        HttpExchangeError: no usable answer; ``kind`` says why.
    """
    exchange = _Exchange(method.upper(), url, limits)
    response, _ = await exchange.run(body, headers or {})
    return response


@dataclass(frozen=True, slots=True)
class KeptConnection:
    """A connection left open after a clean answer, for the next exchange with its server."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    server: tuple[str, int, bool]  # host, port, TLS

    def usable_for(self, server: tuple[str, int, bool]) -> bool:
        """Whether it leads to ``server`` and neither end has closed it meanwhile."""
        return (
            self.server == server
            and not self.reader.at_eof()
            and not self.writer.transport.is_closing()
        )

    def close(self) -> None:
        """Close it at once."""
        self.writer.transport.abort()


async def http_request_kept(
    method: str,
    url: str,
    limits: HttpLimits,
    kept: KeptConnection | None,
    *,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
) -> tuple[HttpResponse, KeptConnection | None]:
    """:func:`http_request` on ``kept`` when it is usable; the connection to keep, if any.

    A kept connection that the server closed while it was idle is found closed before the
    request is sent, or fails it at once; a GET or HEAD is then sent once more on a new
    connection, within the same ``limits``.

    Raises:
        HttpExchangeError: no usable answer; ``kind`` says why.
    """
    exchange = _Exchange(method.upper(), url, limits)
    if kept is not None and not kept.usable_for(exchange.server):
        kept.close()
        kept = None
    if kept is not None:
        try:
            return await exchange.run(body, headers or {}, keep=True, on=kept)
        except HttpExchangeError as exc:
            if exc.kind != CLOSED or exchange.method not in _IDEMPOTENT_METHODS:
                raise
    return await exchange.run(body, headers or {}, keep=True)


@dataclass(frozen=True, slots=True)
class _Target:
    host: str
    port: int
    tls: bool
    request_target: str
    host_header: str

    @classmethod
    def of(cls, method: str, url: str) -> _Target:
        shown = without_userinfo(url)  # messages reach logs: never a password in them
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            message = f"{method} {shown}: not a URL: {exc}"
            raise HttpExchangeError(message, INVALID) from exc
        if parts.scheme not in ("http", "https") or not parts.hostname:
            message = f"{method} {shown}: only http:// and https:// URLs with a host are supported"
            raise HttpExchangeError(message, INVALID)
        tls = parts.scheme == "https"
        default_port = 443 if tls else 80
        host = parts.hostname
        shown_host = f"[{host}]" if ":" in host else host
        host_header = shown_host if port in (None, default_port) else f"{shown_host}:{port}"
        request_target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if any(char.isspace() or ord(char) < 0x20 or ord(char) == 0x7F for char in url):
            message = f"{method} {shown!r}: a URL must not hold spaces or control characters"
            raise HttpExchangeError(message, INVALID)
        return cls(host, port or default_port, tls, request_target, host_header)


class _Exchange:
    """One request and its answer; the socket never outlives :meth:`run`."""

    def __init__(self, method: str, url: str, limits: HttpLimits) -> None:
        self.method = method
        self._url = without_userinfo(url)  # for messages only
        self._limits = limits
        self._target = _Target.of(method, url)
        self._loop = asyncio.get_running_loop()
        self._deadline = self._loop.time() + limits.total_s

    @property
    def server(self) -> tuple[str, int, bool]:
        """Host, port and TLS of the server talked to."""
        return self._target.host, self._target.port, self._target.tls

    async def run(
        self,
        body: bytes,
        headers: Mapping[str, str],
        *,
        keep: bool = False,
        on: KeptConnection | None = None,
    ) -> tuple[HttpResponse, KeptConnection | None]:
        """The answer, on ``on`` or a new connection; with ``keep``, the connection if reusable."""
        request = self._request_bytes(body, headers, keep=keep)
        reader, writer = (on.reader, on.writer) if on is not None else await self._connect()
        kept = None
        try:
            writer.write(request)
            await self._within(writer.drain(), "sending the request")
            head = await self._head(reader)
            body_reader = BodyReader(reader, self._limits.max_body_bytes, self._within)
            answer = await body_reader.read(head, bodyless=self.method == "HEAD")
            if keep and self._reusable(head):
                kept = KeptConnection(reader, writer, self.server)
        except Malformed as exc:
            raise self._failure(str(exc), MALFORMED) from exc
        except Oversized as exc:
            raise self._failure(str(exc), OVERSIZED) from exc
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            message = f"connection cut off: {_described(exc)}"
            raise self._failure(message, CLOSED) from exc
        except OSError as exc:
            raise self._failure(_described(exc), CLOSED) from exc
        finally:
            # Abort, not close: nothing is left to send, and a server still trickling must
            # not keep this socket (or anything of this exchange) alive a moment longer.
            if kept is None:
                writer.transport.abort()
        return HttpResponse(head.status, head.headers, answer), kept

    def _reusable(self, head: Head) -> bool:
        """Whether the connection may carry another exchange after this answer."""
        closing = any(value.lower() == "close" for value in head.values("connection"))
        return (
            head.version == "HTTP/1.1"
            and head.status != 101
            and not closing
            and framed(head, bodyless=self.method == "HEAD")
        )

    def _request_bytes(self, body: bytes, headers: Mapping[str, str], *, keep: bool) -> bytes:
        fields = {
            "Host": self._target.host_header,
            "User-Agent": f"vllm-governor/{__version__}",
            "Accept-Encoding": "identity",
            **({} if keep else {"Connection": "close"}),
            **headers,
        }
        if body or self.method not in _BODYLESS_METHODS:
            fields["Content-Length"] = str(len(body))
        lines = [f"{self.method} {self._target.request_target} HTTP/1.1"]
        for name, value in fields.items():
            if any(char in f"{name}{value}" for char in "\r\n\0"):
                message = f"header {name!r} holds a line break or NUL"
                raise self._failure(message, INVALID)
            lines.append(f"{name}: {value}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        target = self._target
        context = _tls_context() if target.tls else None
        addresses = await self._within(self._addresses(), "resolving the host name")
        problems: list[OSError] = []
        for address in addresses:
            try:
                return await self._within(
                    asyncio.open_connection(
                        address,
                        target.port,
                        ssl=context,
                        server_hostname=target.host if context else None,
                        limit=self._limits.max_head_bytes,
                    ),
                    "connecting",
                )
            except OSError as exc:
                problems.append(exc)
        if all(isinstance(problem, ConnectionRefusedError) for problem in problems):
            message = "connection refused"
            raise self._failure(message, REFUSED) from problems[0]
        message = "; ".join(_described(problem) for problem in problems)
        raise self._failure(message, UNREACHABLE) from problems[0]

    async def _addresses(self) -> list[str]:
        host = self._target.host
        try:
            ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            return [host]
        try:
            addresses = await addresses_of(host, self._target.port)
        except OSError as exc:
            message = f"cannot resolve {host}: {_described(exc)}"
            raise self._failure(message, UNREACHABLE) from exc
        if not addresses:
            message = f"{host} resolves to no address"
            raise self._failure(message, UNREACHABLE)
        return addresses

    async def _head(self, reader: asyncio.StreamReader) -> Head:
        """The status line and headers, skipping interim (1xx) answers."""
        while True:
            try:
                raw = await self._within(reader.readuntil(b"\r\n\r\n"), "waiting for the head")
            except asyncio.LimitOverrunError as exc:
                limit = self._limits.max_head_bytes
                message = f"head larger than {limit} bytes"
                raise self._failure(message, OVERSIZED) from exc
            except asyncio.IncompleteReadError as exc:
                got = f"after {len(exc.partial)} bytes" if exc.partial else "without a byte"
                message = f"connection closed {got}, before the head ended"
                raise self._failure(message, CLOSED) from exc
            head = parse_head(raw)
            if not 100 <= head.status < 200 or head.status == 101:
                return head

    async def _within(self, step: Awaitable[T], what: str) -> T:
        """``step``, given the time left of the exchange and at most ``read_s``."""
        left = self._deadline - self._loop.time()
        read_s = self._limits.read_s
        per_read = read_s is not None and read_s < left
        window = read_s if per_read and read_s is not None else left
        try:
            async with asyncio.timeout(window):
                return await step
        except TimeoutError as exc:
            if per_read:
                message = f"nothing from the server for {read_s:g} s ({what})"
            else:
                message = f"no complete answer within {self._limits.total_s:g} s ({what})"
            raise self._failure(message, TIMEOUT) from exc

    def _failure(self, message: str, kind: str) -> HttpExchangeError:
        return HttpExchangeError(f"{self.method} {self._url}: {message}", kind)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The system's CAs, hostnames checked: built once, at the first https exchange."""
    return ssl.create_default_context()


def _described(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
