"""A one-off look at the signals, for ``signals`` (and ``whatif``) when no daemon runs.

The same sources and store as the daemon, run for a short while and then stopped: what it
shows is what the daemon would see, except that derived signals (rates, quantiles) cover the
span actually collected, not ``signals.window_s``: a few seconds of scrapes can never cover the
daemon's 60 s window, and every rate and quantile would read ``no_data``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from daemon.core.clock import Clock
from daemon.core.settings import GovernorConfig
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.runtime.supervisor import supervise
from daemon.sources.view import SignalRow


@dataclass(frozen=True, slots=True)
class OneOffLook:
    """The signals seen by a one-off collection, and the window its derived signals cover."""

    rows: list[SignalRow]
    sources: list[dict[str, Any]]
    window_s: float  # from the start of the collection to its end


async def collect_once(config: GovernorConfig, clock: Clock, collect_s: float) -> OneOffLook:
    """Run every source for ``collect_s`` seconds; the rows over that span, and the health."""
    started = clock.monotonic()
    plane = await collected_plane(config, clock, collect_s)
    # The window (started, now]: every sample taken, the first one included.
    window_s = clock.monotonic() - started
    return OneOffLook(plane.rows(window_s=window_s), plane.source_status(), window_s)


async def collected_plane(config: GovernorConfig, clock: Clock, window_s: float) -> SignalPlane:
    """Run every source for ``window_s`` seconds; return the plane, its store filled."""
    plane = SignalPlane(config, clock, CollectorRegistry(), window_s=window_s)
    stop = asyncio.Event()

    def stop_after_window() -> None:
        asyncio.get_running_loop().call_later(window_s, stop.set)

    await supervise(plane.tasks(), stop, on_ready=stop_after_window)
    return plane
