"""Counting the requests a draining vLLM refuses, while the restart command stops it.

On SIGTERM with ``--shutdown-timeout N``, vLLM 0.32 finishes what it runs and has queued but
keeps its port open and ``/health`` at 200, and answers every *new* request with HTTP 500
("cannot schedule new futures after shutdown"), not 503 (observed on a real server). Without a
gate in front that stops admitting first, those requests are casualties of the change, and
the journal should say how many. vLLM's HTTP instrumentation counts every answer in
``http_requests_total{status="5xx"}``; the governor reads that counter of the *old* process
(its ``process_start_time_seconds``) before the restart and for as long as the old process
still answers, and the difference is the count. It is a lower bound: requests refused after
the last successful read, in the old process's last half-second, are not seen.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from actuators.vllm.probes import process_start_of, same_process
from daemon.api import Clock

_FIVE_XX = re.compile(r'^http_requests_total\{[^}]*status="5xx"[^}]*\}\s+(\S+)', re.MULTILINE)
_INTERVAL_S = 0.5


@dataclass(frozen=True, slots=True)
class Reading:
    """One read of the old process's counters."""

    process_start: float | None
    refused: float


def reading(page: str) -> Reading:
    """The process start and the 5xx answers counted on a ``/metrics`` page."""
    refused = sum(float(value) for value in _FIVE_XX.findall(page))
    return Reading(process_start_of(page), refused)


class DrainWatch:
    """Reads the old process's refusals until it stops answering (or is replaced)."""

    def __init__(self, base_url: str, timeout_s: float, clock: Clock) -> None:
        self._url = f"{base_url}/metrics"
        self._timeout_s = timeout_s
        self._clock = clock
        self.first: Reading | None = None
        self.last: Reading | None = None

    async def read(self) -> Reading | None:
        """One read; None when the server does not answer."""
        import aiohttp

        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout_s)) as s,
                s.get(self._url) as answer,
            ):
                if answer.status != 200:
                    return None
                return reading(await answer.text())
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None

    async def start(self) -> None:
        """The reading before SIGTERM."""
        self.first = self.last = await self.read()

    async def watch(self) -> None:
        """Read until the old process is gone; cancelled when the restart command ends."""
        if self.first is None:
            return
        while True:
            await asyncio.sleep(_INTERVAL_S)
            found = await self.read()
            if found is None or not same_process(found.process_start, self.first.process_start):
                return
            self.last = found

    def refused(self) -> int | None:
        """Requests the old process refused after the first read; None when never read."""
        if self.first is None or self.last is None:
            return None
        return max(0, round(self.last.refused - self.first.refused))
