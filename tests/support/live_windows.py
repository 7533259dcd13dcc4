"""The engine's signal windows over a signal plane that scrapes one vLLM server meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from prometheus_client import CollectorRegistry

from daemon.api import SystemClock, VllmInstance
from daemon.core.settings import (
    GovernorConfig,
    HostSourceSection,
    NvmlSourceSection,
    SourcesSection,
)
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.evaluation.signal_windows import StoreSignalWindows
from daemon.engine.runtime.supervisor import EternalTask, Readiness


@asynccontextmanager
async def live_windows(instance: VllmInstance) -> AsyncIterator[StoreSignalWindows]:
    """The engine's signal windows over a signal plane that scrapes the sim meanwhile."""
    config = GovernorConfig(
        vllm=(instance,),
        sources=SourcesSection(
            nvml=NvmlSourceSection(enabled=False), host=HostSourceSection(enabled=False)
        ),
    )
    plane = SignalPlane(config, SystemClock(), CollectorRegistry())

    async def run(task: EternalTask) -> None:
        await task.run(Readiness())

    async with asyncio.TaskGroup() as group:
        running = [group.create_task(run(task)) for task in plane.tasks()]
        try:
            yield StoreSignalWindows(plane)
        finally:
            for task in running:
                task.cancel()
