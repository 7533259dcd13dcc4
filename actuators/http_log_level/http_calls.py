"""The HTTP calls of the log-level actuator, with the client's errors translated at the boundary.

The standard library's client runs in a worker thread, as the polling sources' does: a level is
read every few seconds and changed rarely, and a web framework would stay in an idle daemon's
memory (aiohttp: ~8 MB) for that. Proxies are never used: the admin endpoints sit on this host,
and an ``http_proxy`` variable must not send their traffic elsewhere.
"""

from __future__ import annotations

import asyncio
import http.client
import urllib.error
import urllib.request

from actuators.http_log_level.wire import LevelRequest
from daemon.api import ActuationError

MAX_BODY_CHARS = 1 << 20
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


async def send(request: LevelRequest, timeout_s: float) -> tuple[int, str]:
    """Send one level change; its status and (start of its) body.

    Raises:
        ActuationError: no answer (refused, reset, timed out).
    """
    headers = {"Content-Type": request.content_type} if request.body else {}
    data = request.body or None
    call = _request(request.url, request.method, data, headers)
    return await asyncio.to_thread(_exchange, call, timeout_s)


async def get(url: str, timeout_s: float) -> tuple[int, str]:
    """GET ``url``; its status and body.

    Raises:
        ActuationError: no answer (refused, reset, timed out).
    """
    return await asyncio.to_thread(_exchange, _request(url, "GET", None, {}), timeout_s)


def _request(
    url: str, method: str, data: bytes | None, headers: dict[str, str]
) -> urllib.request.Request:
    """The request, for an http(s) URL only (the config checks it too: never ``file:``)."""
    if not url.startswith(("http://", "https://")):
        message = f"only http(s) URLs can carry a log level, not {url!r}"
        raise ActuationError(message)
    return urllib.request.Request(  # noqa: S310 - scheme checked above
        url, data=data, headers=headers, method=method
    )


def _exchange(call: urllib.request.Request, timeout_s: float) -> tuple[int, str]:
    """One request and its answer; an HTTP error status is an answer, not a failure."""
    try:
        with _OPENER.open(call, timeout=timeout_s) as answer:
            return answer.status, _text(answer.read(MAX_BODY_CHARS))
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, _text(exc.read(MAX_BODY_CHARS))
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        message = f"{call.get_method()} {call.full_url}: {type(exc).__name__}: {exc}"
        raise ActuationError(message) from exc


def _text(body: bytes) -> str:
    return body.decode("utf-8", errors="replace")
