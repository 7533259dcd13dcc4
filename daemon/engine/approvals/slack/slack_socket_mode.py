"""The Socket Mode transport: a WebSocket the governor opens to Slack; no public endpoint.

slack-sdk's aiohttp :class:`~slack_sdk.socket_mode.aiohttp.SocketModeClient` asks for a URL
with the app-level token (``apps.connections.open``), connects, answers pings and reconnects
by itself when Slack asks it to. Slack wants each envelope acknowledged within 3 s or it sends
it again, so the listener acknowledges *first* and only then queues the payload for the
approval listener: judging a click (and answering the clicker) never delays an ack. A
redelivered envelope carries the same click, which the state machine refuses as a replay.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from daemon.core.approval_settings import SlackSection
from daemon.engine.approvals.slack.slack_api import SlackApi

log = logging.getLogger(__name__)

Inbox = asyncio.Queue[tuple[str, dict[str, Any]]]
CONNECT_TIMEOUTS = 3  # connect() may take a few Web API calls: this many call timeouts


async def run_socket_mode(
    section: SlackSection, api: SlackApi, app_token: str, inbox: Inbox
) -> None:
    """Stay connected until cancelled; raise when the connection cannot be (re)made."""
    client = SocketModeClient(app_token=app_token, web_client=api.client())

    async def on_request(client: AsyncBaseSocketModeClient, request: SocketModeRequest) -> None:
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
        inbox.put_nowait((request.type, request.payload))

    client.socket_mode_request_listeners.append(on_request)
    try:
        # connect() retries by itself while apps.connections.open fails: bound it, and let
        # the guard around this task back off instead.
        await asyncio.wait_for(client.connect(), section.timeout_s * CONNECT_TIMEOUTS)  # type: ignore[no-untyped-call]
        log.info("Slack Socket Mode connected")
        # The client reconnects by itself from here on; this task only keeps it open.
        await asyncio.Event().wait()
    finally:
        await client.close()  # type: ignore[no-untyped-call]
