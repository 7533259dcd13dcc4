"""A loopback HTTP server that answers every request like a broken Prometheus would.

Tests script the status, the body and a delay, to check that garbage and slow answers are
translated into the governor's errors instead of crashing a source.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self


@dataclass
class Answer:
    """What every request gets; changeable while the server runs."""

    body: bytes = b"{}"
    status: int = 200
    delay_s: float = 0.0


class FakePrometheus:
    """A threaded HTTP server answering :class:`Answer` on any path; a context manager."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.answer = answer or Answer()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """Where it listens."""
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        answer = self.answer

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                time.sleep(answer.delay_s)
                # After a delay the client has usually given up and closed: that is the point.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer.body)))
                    self.end_headers()
                    self.wfile.write(answer.body)

            do_GET = do_POST = _reply

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
