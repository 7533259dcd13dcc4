"""The HTTP interactivity transport: Slack posts each interaction to an endpoint we serve.

Each request is verified before anything else is read from it
(:class:`~daemon.approvals.signatures.RequestVerifier`: Slack's HMAC signature, a 5-minute
window, no replay of a signature already accepted); a request that fails gets ``401`` and is
logged with the check that failed. A verified one is answered ``200`` at once and queued for the
approval listener, well within Slack's 3 s. Listen on loopback behind a TLS-terminating proxy.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web

from daemon.approvals.errors import UnverifiedRequest
from daemon.approvals.signatures import RequestVerifier
from daemon.core.approval_settings import SlackSection
from daemon.core.clock import Clock

log = logging.getLogger(__name__)

Inbox = asyncio.Queue[tuple[str, dict[str, Any]]]
MAX_BODY_BYTES = 256 * 1024


async def serve_interactivity(
    section: SlackSection,
    signing_secret: str,
    clock: Clock,
    inbox: Inbox,
    on_listening: Callable[[int], None] = lambda _port: None,
) -> None:
    """Serve the endpoint until cancelled."""
    verifier = RequestVerifier(signing_secret, clock)

    async def interactivity(request: web.Request) -> web.Response:
        body = await request.read()
        try:
            verifier.verify(body, dict(request.headers))
        except UnverifiedRequest as exc:
            log.warning(
                "Slack request refused",
                extra={"reason": exc.reason.value, "error": str(exc), "peer": request.remote},
            )
            return web.Response(status=401, text=exc.reason.value)
        received = _read(body)
        if received is None:
            return web.Response(status=400, text="not an interaction Slack sends")
        inbox.put_nowait(received)
        return web.Response(text="")

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post(section.http_path, interactivity)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, section.http_listen_host, section.http_listen_port)
        await site.start()
        port = int(runner.addresses[0][1])
        log.info(
            "Slack interactivity endpoint listening",
            extra={"host": section.http_listen_host, "port": port, "path": section.http_path},
        )
        on_listening(port)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def _read(body: bytes) -> tuple[str, dict[str, Any]] | None:
    """``interactive`` (a ``payload=`` JSON field) or ``slash_commands`` (form fields)."""
    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=False)
    except UnicodeDecodeError:
        return None
    if "payload" in form:
        try:
            payload = json.loads(form["payload"][0])
        except json.JSONDecodeError:
            return None
        return ("interactive", payload) if isinstance(payload, dict) else None
    if "command" in form:
        return "slash_commands", {key: values[0] for key, values in form.items()}
    return None
