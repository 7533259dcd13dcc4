"""A real HTTP server on loopback that plays a vLLM's /health, /version and /metrics.

Tests script what it answers (a fixture page, garbage, a 503, a slow answer) and can stop and
restart it on the same port to play a vLLM restart.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self

from tests.support.services import free_port


@dataclass
class Script:
    """What the exporter answers, changeable while it runs."""

    metrics: bytes = b""
    metrics_status: int = 200
    health_status: int = 200
    version: bytes = b'{"version": "0.33.0"}'
    delay_s: float = 0.0
    health_delay_s: float = 0.0
    models_status: int = 404  # /v1/models: 404 (not serving yet) unless a test says otherwise
    requests: list[tuple[str, str | None]] = field(default_factory=list)


class FixtureExporter:
    """A threaded HTTP server that serves :class:`Script`; a context manager."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self.port = free_port()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """Where it listens."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Listen (again) on the same port."""
        script = self.script

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                script.requests.append((self.path, self.headers.get("Accept")))
                time.sleep(script.delay_s)
                if self.path == "/health":
                    time.sleep(script.health_delay_s)
                status, body = {
                    "/metrics": (script.metrics_status, script.metrics),
                    "/health": (script.health_status, b""),
                    "/version": (200, script.version),
                    "/v1/models": (script.models_status, b'{"object": "list", "data": []}'),
                }.get(self.path, (404, b"not found"))
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop listening: connections are refused, as with a vLLM that is restarting."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
