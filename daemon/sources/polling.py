"""The runner shared by every polling source (vLLM, Prometheus, NVML, host).

A polling source is an async context manager with a ``poll`` coroutine. The runner calls it
every ``interval_s``, bounds each call by ``timeout_s``, stores the samples, keeps the source's
health, and after a failure waits with jittered exponential backoff instead of the interval.
A source that is down never takes the daemon down: only a bug (an exception that is not a
:class:`SourceError`) crashes the task, and the supervisor then restarts the daemon.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, Self

from daemon.core.backoff import Backoff
from daemon.core.clock import Clock
from daemon.core.errors import SourceError, SourceUnavailable
from daemon.sources.health import HealthBoard
from daemon.sources.samples import Sample, SampleColumns
from daemon.sources.store import SignalStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PollResult:
    """What one successful poll produced; ``detail`` qualifies the source's state.

    Attributes:
        listed: Samples, one object each.
        detail: What qualifies the source's state ("" when nothing does).
        columns: More samples, as columns (a vLLM page's, which the store appends by column).
    """

    listed: tuple[Sample, ...]
    detail: str = ""
    columns: SampleColumns | None = None

    @property
    def samples(self) -> tuple[Sample, ...]:
        """Every sample of the poll: the columns' first, then those listed."""
        if self.columns is None:
            return self.listed
        return (*self.columns.samples(), *self.listed)


class PollingSource(Protocol):
    """A source read on a fixed interval."""

    name: str
    interval_s: float
    timeout_s: float

    async def __aenter__(self) -> Self:
        """Open what the source needs (clients, handles)."""

    async def __aexit__(self, *exc_info: object) -> None:
        """Release it."""

    async def poll(self, now: float) -> PollResult:
        """Observe once; raise :class:`SourceError` when the far end cannot be read."""


@dataclass(frozen=True, slots=True)
class PlannedSource:
    """A source to run, and the settings that built it (a change restarts it).

    Attributes:
        source: The source.
        stale_after_s: Age beyond which its samples no longer count.
        settings: What it was built from, compared on a reload.
    """

    source: PollingSource
    stale_after_s: float
    settings: object


# What a source says when its far end refuses connections: starting (or restarting), not slow.
STARTING = frozenset({"starting", "refused"})


@dataclass
class PollingRunner:
    """Drives one polling source for as long as the daemon runs."""

    source: PollingSource
    store: SignalStore
    health: HealthBoard
    clock: Clock
    backoff: Backoff = field(default_factory=Backoff)
    on_poll: Callable[[str, bool], None] = lambda _source, _ok: None

    async def run(self, started: Callable[[], None]) -> None:
        """Poll forever; call ``started`` after the first attempt, whatever its outcome."""
        self.health.register(self.source.name, self.clock.monotonic())
        async with self.source:
            while True:
                delay = await self._attempt()
                started()
                await asyncio.sleep(delay)

    async def _attempt(self) -> float:
        now = self.clock.monotonic()
        try:
            async with asyncio.timeout(self.source.timeout_s):
                result = await self.source.poll(now)
        except TimeoutError:
            error: SourceError = SourceUnavailable(
                f"no answer within {self.source.timeout_s} s", detail="timeout"
            )
        except SourceError as exc:
            error = exc
        else:
            self.store.add_scrape(result.listed, result.columns)
            self.health.succeeded(self.source.name, self.clock.monotonic(), result.detail)
            self.backoff.reset()
            self.on_poll(self.source.name, True)
            return self.source.interval_s
        self.health.failed(self.source.name, self.clock.monotonic(), str(error), _detail(error))
        self.on_poll(self.source.name, False)
        if error.detail in STARTING:
            # A refused connection costs neither side anything, and a server restarting (a
            # vLLM loading its model refuses for a minute) must be seen again as soon as it
            # serves: backing off to a minute would blind the governor just after a change.
            return self.source.interval_s
        # Never poll a failing source faster than a healthy one.
        return max(self.backoff.next_delay(), self.source.interval_s)


def _detail(error: SourceError) -> str:
    return error.detail or type(error).__name__
