"""A hostile HTTP server on loopback: slowloris pages, lies about lengths, resets mid-answer.

Each connection runs one *behaviour* in a thread of its own, on the raw socket, so that a test
can answer what no well-behaved server would: a page trickled at one byte a second, headers
that never end, a body longer than it said, a connection reset halfway. The server counts the
connections it got and how many were open at once (a client that abandons a read without
closing its socket shows up there).
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Self

Behaviour = Callable[[socket.socket, threading.Event], None]

HEAD_END = b"\r\n\r\n"


def ok_head(length: int | None = None, *, chunked: bool = False) -> bytes:
    """A 200 status line and headers, with a Content-Length or chunked transfer encoding."""
    lines = [b"HTTP/1.1 200 OK", b"Content-Type: text/plain; version=0.0.4"]
    if chunked:
        lines.append(b"Transfer-Encoding: chunked")
    elif length is not None:
        lines.append(b"Content-Length: %d" % length)
    return b"\r\n".join(lines) + HEAD_END


def read_request(conn: socket.socket, timeout_s: float = 5.0) -> bytes:
    """The request's head, read up to its blank line (b"" when the client left first)."""
    conn.settimeout(timeout_s)
    received = b""
    with contextlib.suppress(OSError):
        while HEAD_END not in received:
            data = conn.recv(4096)
            if not data:
                break
            received += data
    conn.settimeout(None)
    return received


def trickle(head: bytes, body: bytes, *, bytes_per_s: float, slow_head: bool = False) -> Behaviour:
    """Answer ``head`` at once (or trickled too) then ``body`` at ``bytes_per_s``, byte by byte."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        read_request(conn)
        if not slow_head:
            conn.sendall(head)
        for byte in (head if slow_head else b"") + body:
            if _client_left(conn, 1.0 / bytes_per_s) or stop.is_set():
                return
            conn.sendall(bytes([byte]))
        _client_left(conn, 60.0)  # the page is out: hold the connection open, as a slow server

    return behave


def answer(raw: bytes, *, then_hold: bool = False) -> Behaviour:
    """Send ``raw`` as the whole answer, then close (or hold the connection open)."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        read_request(conn)
        conn.sendall(raw)
        if then_hold:
            _client_left(conn, 60.0)

    return behave


def reset_after(raw: bytes) -> Behaviour:
    """Send ``raw``, then reset the connection (a TCP RST, not an orderly close)."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        read_request(conn)
        conn.sendall(raw)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    return behave


def endless(head: bytes, piece: bytes) -> Behaviour:
    """Answer ``head``, then ``piece`` again and again, as fast as the client reads."""

    def behave(conn: socket.socket, stop: threading.Event) -> None:
        read_request(conn)
        conn.sendall(head)
        with contextlib.suppress(OSError):
            while not stop.is_set():
                conn.sendall(piece)

    return behave


def _client_left(conn: socket.socket, wait_s: float) -> bool:
    """Wait up to ``wait_s``; True as soon as the client closed or reset its end."""
    readable, _, _ = select.select([conn], [], [], wait_s)
    if not readable:
        return False
    try:
        return conn.recv(4096, socket.MSG_PEEK) == b""
    except OSError:
        return True


class HostileServer:
    """A TCP server on 127.0.0.1 that runs ``behaviour`` on every connection; a context manager."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.connections = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []

    @property
    def base_url(self) -> str:
        """Where it listens."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self._listener.listen(64)
        accepter = threading.Thread(target=self._accept, name="hostile accept", daemon=True)
        accepter.start()
        self._threads.append(accepter)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for conn in self._open:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                self._open.add(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with contextlib.suppress(OSError):
                self.behaviour(conn, self._stop)
        finally:
            with self._lock:
                self.in_flight -= 1
                self._open.discard(conn)
            conn.close()


def cardinality_bomb(page: bytes, series: int, *, offset: int = 0, pad: int = 0) -> bytes:
    """``page`` followed by ``series`` samples of a known vLLM gauge, each with its own label value.

    Every line is a distinct series of ``vllm:num_requests_running`` (label ``bomb``), the shape
    of an exporter that put a request id into a label; ``offset`` shifts the values, so that a
    server changing it between scrapes shows series that stop appearing, and ``pad`` makes each
    value that many characters longer.
    """
    padding = b"x" * pad
    lines = (
        b'vllm:num_requests_running{model_name="bomb",bomb="v%010d%s"} 1.0\n'
        % (offset + index, padding)
        for index in range(series)
    )
    return page + b"".join(lines)
