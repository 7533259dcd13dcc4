"""Live log levels of other services (``[[http_log_level]]``): their reader and their runner.

The *log level reader* reads each target's level every ``poll_interval_s``; the policies see it
as the target's ``log_level`` knob while the reading is younger than ``stale_after_s`` (an old
or failed reading is no value at all, never a guess). The *log level runner* first finishes
what a previous governor left open in the journal, then applies the changes the gate routed
here, one task per change (the actuator serialises them per target). Outcomes are reported
through the actuation plane, like vLLM changes: counted, logged, quarantined on a revert.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from pathlib import Path

from daemon.core.actuation import ActuationJournal, ActuationResult, ChangeRequest
from daemon.core.actuation import LogLevelActuator as Actuator
from daemon.core.clock import Clock
from daemon.core.http_log_level_settings import LOG_LEVEL_KNOB, HttpLogLevelTarget
from daemon.engine.runtime.supervisor import EternalTask, Readiness

log = logging.getLogger(__name__)

LogLevelFactory = Callable[[ActuationJournal, Clock, Path], Actuator]


class LogLevelPlane:
    """Owns the log-level actuator, the levels last read, and the queue of changes."""

    def __init__(
        self,
        targets: Callable[[], tuple[HttpLogLevelTarget, ...]],
        actuator: Actuator,
        clock: Clock,
        report: Callable[[ActuationResult], None],
    ) -> None:
        self._targets = targets
        self.actuator = actuator
        self._clock = clock
        self._report = report
        self._levels: dict[str, tuple[float, float]] = {}  # name -> (level, read at)
        self._queue: asyncio.Queue[tuple[HttpLogLevelTarget, ChangeRequest]] = asyncio.Queue()

    def tasks(self) -> list[EternalTask]:
        """The reader and the runner, when any target is configured."""
        if not self._targets():
            return []
        return [
            EternalTask("log level reader", self._read_forever),
            EternalTask("log level runner", self._run),
        ]

    def by_name(self) -> dict[str, HttpLogLevelTarget]:
        """The configured targets by name."""
        return {target.name: target for target in self._targets()}

    def knobs(self) -> dict[str, Mapping[str, float]]:
        """Each target's level in force, where a fresh reading says it."""
        now = self._clock.monotonic()
        fresh: dict[str, Mapping[str, float]] = {}
        for target in self._targets():
            reading = self._levels.get(target.name)
            if reading is not None and now - reading[1] <= target.stale_after_s:
                fresh[target.name] = {LOG_LEVEL_KNOB: reading[0]}
        return fresh

    def submit(self, target: HttpLogLevelTarget, request: ChangeRequest) -> None:
        """Queue a change for the runner."""
        self._queue.put_nowait((target, request))

    async def _read_forever(self, readiness: Readiness) -> None:
        readiness.started()
        while True:
            async with asyncio.TaskGroup() as group:
                for target in self._targets():
                    group.create_task(self._read(target), name=f"read log level {target.name}")
            interval = min((t.poll_interval_s for t in self._targets()), default=15.0)
            await asyncio.sleep(interval)

    async def _read(self, target: HttpLogLevelTarget) -> None:
        level = await self.actuator.read(target)
        if level is None:
            self._levels.pop(target.name, None)
        else:
            self._levels[target.name] = (level, self._clock.monotonic())

    async def _run(self, readiness: Readiness) -> None:
        readiness.started()
        async with asyncio.TaskGroup() as group:
            for target in self._targets():
                group.create_task(self._reconcile(target), name=f"reconcile {target.name}")
        async with asyncio.TaskGroup() as group:
            while True:
                target, request = await self._queue.get()
                group.create_task(self._apply(target, request), name=f"change {target.name}")

    async def _reconcile(self, target: HttpLogLevelTarget) -> None:
        try:
            result = await self.actuator.reconcile(target)
        except Exception:
            log.exception("reconciling a log level failed", extra={"target": target.name})
            return
        if result is not None:
            self._report(result)

    async def _apply(self, target: HttpLogLevelTarget, request: ChangeRequest) -> None:
        try:
            result = await self.actuator.apply(target, request)
        except Exception:
            # A bug in one change must not stop the others: finish its entry as a new start
            # of the governor would, from what the service reads back.
            log.exception(
                "a log level change crashed; reconciling it", extra={"target": target.name}
            )
            await self._reconcile(target)
            return
        self._report(result)
        await self._read(target)  # the policies see the new level at their next tick
