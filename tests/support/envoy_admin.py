"""A real HTTP server on loopback that behaves like Envoy's admin ``/logging`` endpoint.

``GET /logging`` lists every logger and its level (``active loggers:`` then ``  name: level``);
``POST /logging?level=X`` sets every logger to X and answers the listing, or 400 when X is not
one of Envoy's levels. Tests can make it *sticky* (it answers 200 but changes nothing, as a
misconfigured proxy might) and read every request it got. It runs an aiohttp app on its own
event loop in a thread, so that a test and a daemon subprocess can both talk to it.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from aiohttp import web

from tests.support.services import free_port

LEVELS = ("trace", "debug", "info", "warning", "error", "critical", "off")
LOGGERS = ("admin", "config", "connection", "http", "router", "upstream")


@dataclass
class AdminState:
    """What the admin endpoint holds, changeable while it runs."""

    level: str = "info"
    sticky: bool = False
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, query)

    def listing(self) -> str:
        lines = ["active loggers:", *(f"  {name}: {self.level}" for name in LOGGERS)]
        return "\n".join(lines) + "\n"


class EnvoyAdmin:
    """The admin endpoint on a free loopback port; a context manager."""

    def __init__(self) -> None:
        self.state = AdminState()
        self.port = free_port()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """Its base URL."""
        return f"http://127.0.0.1:{self.port}"

    def _app(self) -> web.Application:
        state = self.state

        async def listing(request: web.Request) -> web.Response:
            state.requests.append(("GET", request.query_string))
            return web.Response(text=state.listing())

        async def set_level(request: web.Request) -> web.Response:
            state.requests.append(("POST", request.query_string))
            level = request.query.get("level")
            if level is None:
                return web.Response(text=state.listing())
            if level not in LEVELS:
                return web.Response(status=400, text=f"error: unknown logger level {level}\n")
            if not state.sticky:
                state.level = level
            return web.Response(text=state.listing())

        app = web.Application()
        app.router.add_get("/logging", listing)
        app.router.add_post("/logging", set_level)
        return app

    def __enter__(self) -> Self:
        started = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop

        async def serve() -> None:
            self._runner = web.AppRunner(self._app())
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
            started.set()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(serve())
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="envoy admin", daemon=True)
        self._thread.start()
        if not started.wait(10):
            message = "the Envoy admin double did not start"
            raise RuntimeError(message)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        loop, runner = self._loop, self._runner
        if loop is None or self._thread is None:
            return
        if runner is not None:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)
        loop.close()
