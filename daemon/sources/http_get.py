"""Plain HTTP GETs for polling sources, with the client's errors translated at the boundary.

Each GET is one exchange of :mod:`daemon.core.http_client`: on asyncio streams, no thread, and
ended (its socket closed) at its deadline or when its poll is cancelled. A slow server costs
its own source one connection for at most ``timeout_s``, never the other sources anything.
No ``Accept`` header is sent, which is what vLLM's ``/metrics`` wants (an OpenMetrics
``Accept`` may rewrite ``vllm:`` names). Only ``http`` and ``https`` URLs are allowed, and
proxies are never used.
"""

from __future__ import annotations

from daemon.core.errors import HttpExchangeError, SourceError, SourceUnavailable
from daemon.core.http_client import (
    OVERSIZED,
    REFUSED,
    TIMEOUT,
    HttpExchange,
    HttpLimits,
    HttpResponse,
    http_request,
)

MAX_BODY_BYTES = 32 << 20


async def http_get(
    url: str,
    timeout_s: float,
    max_body_bytes: int = MAX_BODY_BYTES,
    exchange: HttpExchange = http_request,
) -> HttpResponse:
    """GET ``url`` within ``timeout_s``; any status is an answer.

    ``exchange`` sends it: a new connection each time, or a source's kept-alive one
    (:class:`~daemon.core.http_keepalive.KeptAliveExchanges`).

    Raises:
        SourceUnavailable: no answer: ``detail`` is ``refused``, ``timeout`` or
            ``unreachable`` (cut off, malformed, no route).
        SourceError: the URL is not http(s), or the body is larger than ``max_body_bytes``
            (``detail="oversized"``).
    """
    if not url.startswith(("http://", "https://")):
        message = f"only http(s) URLs can be scraped, not {url!r}"
        raise SourceError(message)
    limits = HttpLimits(total_s=timeout_s, max_body_bytes=max_body_bytes)
    try:
        return await exchange("GET", url, limits)
    except HttpExchangeError as exc:
        if exc.kind == OVERSIZED:
            raise SourceError(str(exc), detail="oversized") from exc
        detail = {REFUSED: "refused", TIMEOUT: "timeout"}.get(exc.kind, "unreachable")
        raise SourceUnavailable(str(exc), detail=detail) from exc
