"""Asking a vLLM server, over HTTP, what it is: its version, whether it serves, which process.

Ready means what a client needs, in order: the port accepts connections (vLLM refuses them
until its engine is built, so a refusal means *starting*, not dead); ``/health`` answers 200;
``/v1/models`` answers (401 counts: ``--api-key`` guards ``/v1`` only); and ``/metrics`` carries
``vllm:*`` families again. The process start time (``process_start_time_seconds`` of the
Prometheus process collector) tells one server process from the next, which is how the
governor knows whether a restart happened.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from daemon.api import Clock

if TYPE_CHECKING:
    import aiohttp

_START = re.compile(r"^process_start_time_seconds\s+(\S+)\s*$", re.MULTILINE)
_VLLM_FAMILY = re.compile(r"^vllm:", re.MULTILINE)
# Two readings of one process's start time agree to the clock tick (1/100 s); a new process
# started at least that much later.
SAME_PROCESS_S = 0.02

REFUSED = "refused"
READY = "ready"
NOT_RESTARTED = "not_restarted"


@dataclass(frozen=True, slots=True)
class Probe:
    """One look at a server.

    Attributes:
        state: ``ready``, ``refused`` (starting or down), ``unhealthy`` (/health not 200),
            ``no_models``, ``no_metrics`` or ``error`` (timeouts, resets).
        process_start: The serving process's start time (Unix seconds), when it says.
        detail: What was wrong, for people.
    """

    state: str
    process_start: float | None = None
    detail: str = ""

    @property
    def ready(self) -> bool:
        """Whether the server serves."""
        return self.state == READY


def same_process(first: float | None, second: float | None) -> bool | None:
    """Whether two start times are one process; None when either is unknown."""
    if first is None or second is None:
        return None
    return abs(first - second) < SAME_PROCESS_S


async def probe(base_url: str, timeout_s: float) -> Probe:
    """Look once: connection, /health, /v1/models, /metrics."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            return await _look(session, base_url)
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, ConnectionRefusedError):
            return Probe(REFUSED, detail="connection refused (starting, or down)")
        return Probe("error", detail=str(exc))
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Probe("error", detail=f"{type(exc).__name__}: {exc}")


async def _look(session: aiohttp.ClientSession, base_url: str) -> Probe:
    async with session.get(f"{base_url}/health") as health:
        if health.status != 200:
            return Probe("unhealthy", detail=f"/health answered {health.status}")
    async with session.get(f"{base_url}/v1/models") as models:
        if models.status not in (200, 401):
            return Probe("no_models", detail=f"/v1/models answered {models.status}")
    async with session.get(f"{base_url}/metrics") as metrics:
        text = await metrics.text()
    start = process_start_of(text)
    if metrics.status != 200 or not _VLLM_FAMILY.search(text):
        return Probe("no_metrics", start, "/metrics has no vllm:* family yet")
    return Probe(READY, start)


async def wait_ready(
    base_url: str,
    timeout_s: float,
    clock: Clock,
    *,
    not_process: float | None = None,
    interval_s: float = 0.25,
    probe_timeout_s: float = 5.0,
) -> Probe:
    """Probe until the server is ready (and, given ``not_process``, is another process).

    Returns the last probe: ready, or whatever the server was when ``timeout_s`` ran out.
    """
    deadline = clock.monotonic() + timeout_s
    while True:
        found = await probe(base_url, min(probe_timeout_s, timeout_s))
        if found.ready and not same_process(found.process_start, not_process):
            return found
        if clock.monotonic() >= deadline:
            if found.ready:
                return Probe(NOT_RESTARTED, found.process_start, "the old process still serves")
            return found
        await asyncio.sleep(interval_s)


async def read_version(base_url: str, timeout_s: float) -> str | None:
    """What ``/version`` says, or None when it does not answer sensibly."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(f"{base_url}/version") as answer,
        ):
            if answer.status != 200:
                return None
            body = await answer.text()
    except (aiohttp.ClientError, TimeoutError):
        return None
    try:
        version = json.loads(body).get("version")
    except (ValueError, AttributeError):
        return None
    return version if isinstance(version, str) else None


async def post(base_url: str, path: str, timeout_s: float) -> int | None:
    """POST ``path``; the status, or None when the server did not answer."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(f"{base_url}{path}") as answer,
        ):
            return answer.status
    except (aiohttp.ClientError, TimeoutError):
        return None


def process_start_of(text: str) -> float | None:
    """The ``process_start_time_seconds`` of a ``/metrics`` page, when it has one."""
    match = _START.search(text)
    if match is None:
        return None
    try:
        return float(match.group(1))
    except ValueError:
        return None
