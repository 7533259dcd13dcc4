"""The Slack double: an aiohttp server on 127.0.0.1 that the real slack-sdk clients talk to.

Point ``AsyncWebClient(base_url=double.base_url)`` at it (the trailing slash matters) and
``SocketModeClient`` through that client. Every Web API call is recorded (:attr:`calls`), the
messages are kept so that ``chat.update`` edits them (:attr:`store`), faults are scripted per
method (:meth:`fault`), and the Socket Mode endpoint (:attr:`socket`) pushes envelopes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from tests.support.slack_double.faults import (
    Drop,
    Fault,
    FaultScript,
    RateLimited,
    ServerError,
    Slow,
)
from tests.support.slack_double.payloads import block_actions
from tests.support.slack_double.socket_mode import (
    ACK_DEADLINE_S,
    PATH,
    Envelope,
    SocketModeEndpoint,
)
from tests.support.slack_double.store import Call, Message, MessageStore
from tests.support.slack_double.web_api import ApiError, WebApi, check_token, read_args

BOT_TOKEN = "xoxb-0000-double-bot"
APP_TOKEN = "xapp-1-A0DOUBLE-double-app"


class SlackDouble:
    """A wire-level Slack stand-in; an async context manager that starts and stops it."""

    def __init__(
        self,
        bot_token: str = BOT_TOKEN,
        app_token: str = APP_TOKEN,
        *,
        ack_deadline_s: float = ACK_DEADLINE_S,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.calls: list[Call] = []
        self.store = MessageStore()
        self.faults = FaultScript()
        self.socket = SocketModeEndpoint(
            lambda: f"ws://127.0.0.1:{self.port}", self._now, ack_deadline_s
        )
        self._api = WebApi(self.store, self.socket.issue_url)
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._press_serial = itertools.count(1)

    @property
    def port(self) -> int:
        """The port it listens on."""
        assert self._port, "the double is not running"
        return self._port

    @property
    def base_url(self) -> str:
        """The Web API's base URL for ``AsyncWebClient(base_url=...)``."""
        return f"http://127.0.0.1:{self.port}/api/"

    def fault(self, method: str, fault: Fault, times: int = 1) -> None:
        """Make the next ``times`` calls of ``method`` suffer ``fault``."""
        self.faults.add(method, fault, times)

    def calls_to(self, method: str) -> list[Call]:
        """The recorded calls of one method, in order."""
        return [call for call in self.calls if call.method == method]

    def message(self, channel: str, ts: str) -> Message:
        """A stored message (fails the test when there is none)."""
        found = self.store.messages.get((channel, ts))
        assert found is not None, f"no message {ts} in {channel}"
        return found

    async def press(
        self, channel: str, ts: str, user_id: str, action_id: str, *, value: str | None = None
    ) -> Envelope:
        """Push, over Socket Mode, ``user_id`` pressing ``action_id`` on a stored message."""
        action_ts = f"1700001000.{next(self._press_serial):06d}"
        payload = block_actions(
            self.message(channel, ts), user_id, action_id, action_ts=action_ts, value=value
        )
        return await self.socket.push(payload)

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle)
        app.router.add_get(PATH, self.socket.handle)
        # Cancelling a slow handler when its client gives up keeps shutdown quick.
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.socket.close_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        at = self._now()
        fault = self.faults.take(method)
        try:
            args, token = await read_args(request)
        except ApiError as exc:
            call = Call(method, {}, None, request.content_type, at, _name(fault), None)
            self.calls.append(call)
            return self._answer(call, exc)
        call = Call(method, args, token, request.content_type, at, _name(fault), None)
        # Recorded on arrival, so that a call whose client gave up (slow, dropped) still shows.
        self.calls.append(call)
        if isinstance(fault, Slow):
            await asyncio.sleep(fault.delay_s)
        if isinstance(fault, RateLimited):
            answer = {"ok": False, "error": "ratelimited"}
            headers = {"Retry-After": str(fault.retry_after_s)}
            return self._reply(call, answer, 429, headers)
        if isinstance(fault, ServerError):
            return self._reply(call, {"ok": False, "error": "internal_error"}, fault.status)
        if isinstance(fault, Drop) and not fault.after_processing:
            return self._drop(request)
        try:
            check_token(method, token, self.bot_token, self.app_token)
            answer = self._api.call(method, args)
        except ApiError as exc:
            return self._answer(call, exc)
        if isinstance(fault, Drop):
            return self._drop(request)
        return self._reply(call, answer)

    def _answer(self, call: Call, error: ApiError) -> web.Response:
        return self._reply(call, {"ok": False, "error": error.error})

    def _reply(
        self,
        call: Call,
        answer: dict[str, Any],
        status: int = 200,
        headers: dict[str, str] | None = None,
    ) -> web.Response:
        # Calls are recorded on arrival; the answer replaces that record.
        index = next(i for i, recorded in enumerate(self.calls) if recorded is call)
        self.calls[index] = _answered(call, answer)
        return web.Response(
            status=status,
            text=json.dumps(answer),
            content_type="application/json",
            headers=headers,
        )

    def _drop(self, request: web.Request) -> web.Response:
        assert request.transport is not None
        request.transport.abort()
        # aiohttp finds the transport gone and writes nothing: the client sees a disconnect.
        return web.Response()


def _name(fault: Fault | None) -> str | None:
    return None if fault is None else type(fault).__name__


def _answered(call: Call, answer: dict[str, Any]) -> Call:
    return Call(call.method, call.args, call.token, call.content_type, call.at, call.fault, answer)
