"""The HTTP calls of the log-level actuator, with the client's errors translated at the boundary.

Each call is one exchange of the daemon's own HTTP client (``daemon.api.http_request``): on
asyncio streams, no worker thread, ended (its socket closed) at ``timeout_s`` however slowly
the service answers, and at once when the caller is cancelled. An admin endpoint that hangs or
trickles thus holds up its own target for ``timeout_s`` at most, never the other targets or
the vLLM scrapes. A web framework would stay in an idle daemon's memory (aiohttp: ~8 MB) for a
level read every few seconds. Proxies are never used: the admin endpoints sit on this host,
and an ``http_proxy`` variable must not send their traffic elsewhere.
"""

from __future__ import annotations

from actuators.http_log_level.wire import LevelRequest
from daemon.api import ActuationError, HttpExchangeError, HttpLimits, http_request

MAX_BODY_BYTES = 1 << 20


async def send(request: LevelRequest, timeout_s: float) -> tuple[int, str]:
    """Send one level change; its status and body.

    Raises:
        ActuationError: no answer (refused, reset, timed out), or one over 1 MiB.
    """
    headers = {"Content-Type": request.content_type} if request.body else {}
    return await _exchange(request.method, request.url, timeout_s, request.body, headers)


async def get(url: str, timeout_s: float) -> tuple[int, str]:
    """GET ``url``; its status and body.

    Raises:
        ActuationError: no answer (refused, reset, timed out), or one over 1 MiB.
    """
    return await _exchange("GET", url, timeout_s, b"", {})


async def _exchange(
    method: str, url: str, timeout_s: float, body: bytes, headers: dict[str, str]
) -> tuple[int, str]:
    """One request and its answer; an HTTP error status is an answer, not a failure."""
    if not url.startswith(("http://", "https://")):  # the config checks it too: never file:
        message = f"only http(s) URLs can carry a log level, not {url!r}"
        raise ActuationError(message)
    limits = HttpLimits(total_s=timeout_s, max_body_bytes=MAX_BODY_BYTES)
    try:
        answer = await http_request(method, url, limits, body=body, headers=headers)
    except HttpExchangeError as exc:
        raise ActuationError(str(exc)) from exc
    return answer.status, answer.body.decode("utf-8", errors="replace")
