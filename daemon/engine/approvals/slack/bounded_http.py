"""One HTTP/1.1 request, read under limits that a peer who has proved nothing cannot stretch.

The interactivity endpoint answers whoever reaches it, and until the signature is checked every
byte it reads is a stranger's. So the request is read in two steps with the caller in between:
:func:`read_head` reads the request line and headers, which must arrive whole within
:attr:`Limits.header_timeout_s` and fit :attr:`Limits.max_head_bytes`; the caller then refuses
what it can from the head alone (the route, the signature's timestamp) and only then
:func:`read_body` reads the body, which must declare its length (``Content-Length``: no chunked
transfer, no content coding), be at most :attr:`Limits.max_body_bytes` and arrive within
:attr:`Limits.read_timeout_s`. A refusal is a :class:`Refused` with the status to answer.

Each connection carries one request and is closed after the answer (``Connection: close``):
Slack opens a connection per interaction, and a kept-alive idle connection would only hold a
slot of the endpoint's connection cap.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from http import HTTPStatus

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


@dataclass(frozen=True, slots=True)
class Limits:
    """What one endpoint allows. The defaults fit Slack: it sends one small post at once.

    At the defaults the bodies being read hold at most 32 x 256 KiB = 8 MiB at once, however
    the connections trickle; each is gone within 5 + 10 s, or as soon as the cap is reached and
    a new connection needs its place (the oldest gives way once it has been open
    ``evict_after_s``, used by the endpoint: a request from Slack, through a proxy on the same
    host, arrives whole within milliseconds, so it is never the oldest of a full set).
    """

    max_connections: int = 32
    evict_after_s: float = 0.0
    header_timeout_s: float = 5.0
    read_timeout_s: float = 10.0
    max_head_bytes: int = 16 * 1024
    max_body_bytes: int = 256 * 1024


DEFAULT_LIMITS = Limits()


class Refused(Exception):
    """The request is answered with ``status`` and ``reason`` and not read any further.

    It never leaves the endpoint: the server turns it into the answer.
    """

    def __init__(self, status: HTTPStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RequestHead:
    """The request line and the headers; header names in lower case."""

    method: str
    path: str
    headers: dict[str, str]

    @property
    def expects_continue(self) -> bool:
        """Whether the client waits for ``100 Continue`` before it sends the body (curl does)."""
        return self.headers.get("expect", "").lower() == "100-continue"


async def read_head(reader: asyncio.StreamReader, limits: Limits) -> RequestHead:
    """Read and parse the head of a request.

    ``reader`` must have been opened with ``limit=limits.max_head_bytes`` (a head that does not
    end within it is refused without buffering more).

    Raises:
        Refused: ``400`` for a head that is not HTTP/1.x, ``431`` for one too large, ``408``
            when it did not arrive in time.
        asyncio.IncompleteReadError: The peer closed before the head was complete.
    """
    try:
        async with asyncio.timeout(limits.header_timeout_s):
            raw = await reader.readuntil(b"\r\n\r\n")
    except TimeoutError:
        raise Refused(HTTPStatus.REQUEST_TIMEOUT, "the headers did not arrive in time") from None
    except asyncio.LimitOverrunError:
        too_large = HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
        raise Refused(too_large, "the headers are too large") from None
    return _parse_head(raw.decode("latin-1"))


def _parse_head(text: str) -> RequestHead:
    request_line, *lines = text[:-4].split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise Refused(HTTPStatus.BAD_REQUEST, "not an HTTP/1.x request")
    method, target, _version = parts
    headers: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.partition(":")
        # A folded line (leading whitespace) and a name with spaces are refused, as RFC 9112
        # asks: they are how requests are smuggled past a proxy that reads them differently.
        if not colon or not name or name != name.strip() or " " in name:
            raise Refused(HTTPStatus.BAD_REQUEST, "a malformed header line")
        key = name.lower()
        if key in headers:
            raise Refused(HTTPStatus.BAD_REQUEST, f"the header {name} is repeated")
        headers[key] = value.strip(" \t")
    return RequestHead(method, target.partition("?")[0], headers)


def require_route(head: RequestHead, method: str, path: str) -> None:
    """Refuse a request for another path (``404``) or with another method (``405``)."""
    if head.path != path:
        raise Refused(HTTPStatus.NOT_FOUND, "not found")
    if head.method != method:
        raise Refused(HTTPStatus.METHOD_NOT_ALLOWED, f"only {method}")


def body_length(head: RequestHead, limits: Limits) -> int:
    """The body's declared length, checked before any of it is read.

    Raises:
        Refused: ``411`` without a ``Content-Length`` (or with chunked transfer), ``415`` for a
            content coding (a small compressed body can inflate without bound), ``413`` for a
            body larger than the limit, ``400`` for a length that is not a number.
    """
    if "transfer-encoding" in head.headers or "content-length" not in head.headers:
        raise Refused(HTTPStatus.LENGTH_REQUIRED, "a body needs a Content-Length")
    if head.headers.get("content-encoding", "identity").lower() != "identity":
        raise Refused(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "a body must not be encoded")
    declared = head.headers["content-length"]
    if not (declared.isascii() and declared.isdigit()):
        raise Refused(HTTPStatus.BAD_REQUEST, "the Content-Length is not a number")
    if len(declared) > 12 or int(declared) > limits.max_body_bytes:
        too_large = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
        raise Refused(too_large, f"a body is at most {limits.max_body_bytes} bytes")
    return int(declared)


async def read_body(reader: asyncio.StreamReader, length: int, limits: Limits) -> bytes:
    """Read exactly ``length`` bytes (a checked :func:`body_length`) within the read timeout.

    Raises:
        Refused: ``408`` when the body did not arrive in time.
        asyncio.IncompleteReadError: The peer closed before sending all of it.
    """
    try:
        async with asyncio.timeout(limits.read_timeout_s):
            return await reader.readexactly(length)
    except TimeoutError:
        raise Refused(HTTPStatus.REQUEST_TIMEOUT, "the body did not arrive in time") from None


def response(status: HTTPStatus, text: str) -> bytes:
    """A complete plain-text answer that closes the connection."""
    body = text.encode()
    head = (
        f"HTTP/1.1 {status.value} {status.phrase}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body
