"""The framing of an HTTP/1.1 answer: its head, then its body by length, by chunks or to the end.

This is the reading half of :mod:`daemon.core.http_client`, which owns the connection and its
deadlines: every wait here goes through the exchange's ``within``, so that no read can outlast
them. What breaks the framing raises :class:`Malformed`; what exceeds the size allowed,
:class:`Oversized`; a connection that ends early, :class:`asyncio.IncompleteReadError`. The
client turns each into an :class:`~daemon.core.errors.HttpExchangeError` of its kind.
"""

from __future__ import annotations

import asyncio
import string
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")

# Read at most this much at a time: each read is one wait, bounded by the per-read deadline.
PIECE_BYTES = 64 << 10
# A chunked body's trailers are read and dropped, up to this much.
MAX_TRAILER_BYTES = 64 << 10
_HEX_DIGITS = frozenset(string.hexdigits.encode())


class Malformed(Exception):
    """What came back is not HTTP/1.x, or its framing is broken."""


class Oversized(Exception):
    """The answer is larger than allowed."""


class Within(Protocol):
    """Awaits one step of the exchange within its deadlines; ``what`` names it in errors."""

    def __call__(self, step: Awaitable[T], what: str, /) -> Awaitable[T]:
        """The step's result, or the exchange's timeout error."""


@dataclass(frozen=True, slots=True)
class Head:
    """The status and headers of an answer; header names in lower case, in order."""

    status: int
    headers: tuple[tuple[str, str], ...]
    version: str = "HTTP/1.1"

    def values(self, name: str) -> list[str]:
        """Every comma-separated value of header ``name`` (lower case), stripped, in order."""
        return [
            item.strip()
            for key, value in self.headers
            if key == name
            for item in value.split(",")
            if item.strip()
        ]


def parse_head(raw: bytes) -> Head:
    """The head of an answer, from its status line to its blank line (included).

    Raises:
        Malformed: not an HTTP/1.x status line, or a header line without a colon.
    """
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not (version.startswith("HTTP/1.") and code.isdigit() and rest[3:4] in ("", " ")):
        message = f"not an HTTP/1.x status line: {lines[0][:80]!r}"
        raise Malformed(message)
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or line[0] in " \t":
            message = f"not a header line: {line[:80]!r}"
            raise Malformed(message)
        headers.append((name.lower(), value.strip()))
    return Head(int(code), tuple(headers), version)


def framed(head: Head, *, bodyless: bool) -> bool:
    """Whether the body that ``head`` announces ends by itself, not with the connection."""
    if bodyless or head.status in (204, 304) or 100 <= head.status < 200:
        return True
    return bool(head.values("transfer-encoding") or head.values("content-length"))


class BodyReader:
    """Reads one body from ``reader``, at most ``max_bytes`` of it, each wait within deadlines."""

    def __init__(self, reader: asyncio.StreamReader, max_bytes: int, within: Within) -> None:
        self._reader = reader
        self._max_bytes = max_bytes
        self._within = within

    async def read(self, head: Head, *, bodyless: bool) -> bytes:
        """The body that ``head`` announces (decoded when chunked).

        Raises:
            Malformed: an unknown transfer coding, a bad length, broken chunks.
            Oversized: more than ``max_bytes``.
            asyncio.IncompleteReadError: the connection ended before the body did.
        """
        if bodyless or head.status in (204, 304) or 100 <= head.status < 200:
            return b""
        codings = [coding.lower() for coding in head.values("transfer-encoding")]
        if codings:
            if codings != ["chunked"]:
                message = f"unsupported transfer coding {', '.join(codings)!r}"
                raise Malformed(message)
            return await self._chunked()
        lengths = set(head.values("content-length"))
        if len(lengths) > 1 or not all(length.isdigit() for length in lengths):
            message = f"bad Content-Length {', '.join(sorted(lengths))!r}"
            raise Malformed(message)
        if lengths:
            body = bytearray()
            await self._exactly(int(lengths.pop()), body)
            return bytes(body)
        return await self._to_the_end()

    async def _exactly(self, count: int, body: bytearray) -> None:
        """Append the next ``count`` bytes to ``body``."""
        self._check_room(len(body) + count)
        end = len(body) + count
        while len(body) < end:
            piece = await self._within(
                self._reader.read(min(PIECE_BYTES, end - len(body))), "reading the body"
            )
            if not piece:
                raise asyncio.IncompleteReadError(bytes(body), end)
            body += piece

    async def _to_the_end(self) -> bytes:
        body = bytearray()
        while piece := await self._within(self._reader.read(PIECE_BYTES), "reading the body"):
            self._check_room(len(body) + len(piece))
            body += piece
        return bytes(body)

    async def _chunked(self) -> bytes:
        body = bytearray()
        while size := _chunk_size(await self._line("reading a chunk's size")):
            await self._exactly(size, body)
            end = await self._within(self._reader.readexactly(2), "reading the body")
            if end != b"\r\n":
                message = f"a chunk of {size} bytes is not followed by CRLF"
                raise Malformed(message)
        trailers = 0
        while (line := await self._line("reading the trailers")) != b"\r\n":
            trailers += len(line)
            if trailers > MAX_TRAILER_BYTES:
                message = f"trailers larger than {MAX_TRAILER_BYTES} bytes"
                raise Oversized(message)
        return bytes(body)

    async def _line(self, what: str) -> bytes:
        try:
            return await self._within(self._reader.readuntil(b"\r\n"), what)
        except asyncio.LimitOverrunError as exc:
            message = f"a line too long while {what}"
            raise Malformed(message) from exc

    def _check_room(self, size: int) -> None:
        if size > self._max_bytes:
            message = f"body larger than {self._max_bytes} bytes"
            raise Oversized(message)


def _chunk_size(line: bytes) -> int:
    """The size on a chunk's size line (``1a3;ext=1`` and its CRLF)."""
    digits = line.split(b";", 1)[0].strip()
    if not digits or not set(digits) <= _HEX_DIGITS:
        message = f"not a chunk size: {line[:40]!r}"
        raise Malformed(message)
    return int(digits, 16)
