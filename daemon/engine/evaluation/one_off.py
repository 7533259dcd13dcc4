"""A one-off look at the signals, for ``signals`` (and ``whatif``) when no daemon runs.

The same sources and store as the daemon, run for a short window and then stopped: what it
shows is what the daemon would see, with derived signals computed over that window.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CollectorRegistry

from daemon.core.clock import Clock
from daemon.core.settings import GovernorConfig
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.runtime.supervisor import supervise
from daemon.sources.view import SignalRow


async def collect_once(
    config: GovernorConfig, clock: Clock, window_s: float
) -> tuple[list[SignalRow], list[dict[str, Any]]]:
    """Run every source for ``window_s`` seconds; return the rows and the sources' health."""
    plane = await collected_plane(config, clock, window_s)
    return plane.rows(), plane.source_status()


async def collected_plane(config: GovernorConfig, clock: Clock, window_s: float) -> SignalPlane:
    """Run every source for ``window_s`` seconds; return the plane, its store filled."""
    plane = SignalPlane(config, clock, CollectorRegistry(), window_s=window_s)
    stop = asyncio.Event()

    def stop_after_window() -> None:
        asyncio.get_running_loop().call_later(window_s, stop.set)

    await supervise(plane.tasks(), stop, on_ready=stop_after_window)
    return plane
