"""Plain HTTP GETs for polling sources, with errors translated at the boundary.

The standard library's client runs in a worker thread: scrapes are a few per second at most,
and it keeps a web framework out of the daemon's memory. It sends no ``Accept`` header, which
is what vLLM's ``/metrics`` wants (an OpenMetrics ``Accept`` may rewrite ``vllm:`` names).
Only ``http`` and ``https`` URLs are allowed, and proxies are never used.
"""

from __future__ import annotations

import asyncio
import http.client
import urllib.error
import urllib.request
from dataclasses import dataclass

from daemon.core.errors import SourceError, SourceUnavailable

MAX_BODY_BYTES = 32 << 20
# No proxies: the servers scraped this way (vLLM, HAProxy's stats) sit on this host, and an
# http_proxy variable in the environment must not send their traffic elsewhere.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """Status and body of one response."""

    status: int
    body: bytes


async def http_get(url: str, timeout_s: float) -> HttpAnswer:
    """GET ``url``; any status is an answer, no answer at all is :class:`SourceUnavailable`."""
    return await asyncio.to_thread(_get, url, timeout_s)


def _get(url: str, timeout_s: float) -> HttpAnswer:
    if not url.startswith(("http://", "https://")):
        message = f"only http(s) URLs can be scraped, not {url!r}"
        raise SourceError(message)
    request = urllib.request.Request(url, method="GET")  # noqa: S310 - scheme checked above
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            return HttpAnswer(response.status, _read(response, url))
    except urllib.error.HTTPError as exc:
        with exc:
            return HttpAnswer(exc.code, _read(exc, url))
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ConnectionRefusedError):
            message = f"{url}: connection refused"
            raise SourceUnavailable(message, detail="refused") from exc
        message = f"{url}: {reason}"
        raise SourceUnavailable(message, detail="unreachable") from exc
    except (TimeoutError, ConnectionError, http.client.HTTPException, OSError) as exc:
        message = f"{url}: {type(exc).__name__}: {exc}"
        raise SourceUnavailable(message, detail="unreachable") from exc


def _read(response: http.client.HTTPResponse | urllib.error.HTTPError, url: str) -> bytes:
    body = response.read(MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        message = f"{url}: body larger than {MAX_BODY_BYTES} bytes"
        raise SourceError(message, detail="oversized")
    return body
