"""The HTTP calls of the log-level actuator, with aiohttp's errors translated at the boundary."""

from __future__ import annotations

from actuators.http_log_level.wire import LevelRequest
from daemon.api import ActuationError

MAX_BODY_CHARS = 1 << 20


async def send(request: LevelRequest, timeout_s: float) -> tuple[int, str]:
    """Send one level change; its status and (start of its) body.

    Raises:
        ActuationError: no answer (refused, reset, timed out).
    """
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=timeout_s)
    headers = {"Content-Type": request.content_type} if request.body else {}
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.request(
                request.method, request.url, data=request.body or None, headers=headers
            ) as answer,
        ):
            return answer.status, (await answer.text(errors="replace"))[:MAX_BODY_CHARS]
    except (aiohttp.ClientError, TimeoutError) as exc:
        message = f"{request.method} {request.url}: {type(exc).__name__}: {exc}"
        raise ActuationError(message) from exc


async def get(url: str, timeout_s: float) -> tuple[int, str]:
    """GET ``url``; its status and body.

    Raises:
        ActuationError: no answer (refused, reset, timed out).
    """
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as answer:
            return answer.status, (await answer.text(errors="replace"))[:MAX_BODY_CHARS]
    except (aiohttp.ClientError, TimeoutError) as exc:
        message = f"GET {url}: {type(exc).__name__}: {exc}"
        raise ActuationError(message) from exc
