"""The polling sources that run now, replaced whole on a reload.

Each source runs in a task of its own, as its own :class:`~daemon.sources.polling.PollingRunner`.
A reload hands over a new plan: a source whose settings changed (a server's URL, its scrape
interval or timeout, the Prometheus queries...) is stopped and started anew, so it scrapes
what the new configuration says from its next poll on; a source that left the plan is stopped
and its series and health forgotten; a new one is started; one whose settings are the same
keeps running, its series untouched. A stopped runner leaves its source's context (closing
its connections) before the new one starts.

A runner that crashes (a bug: an unreachable far end is a state, not a crash) ends the set,
and the supervisor then stops the daemon, as it does for any task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from daemon.sources.health import HealthBoard
from daemon.sources.polling import PlannedSource, PollingSource
from daemon.sources.store import SignalStore

log = logging.getLogger(__name__)

# A source and a callback to tell when its first attempt is done -> its run.
RunnerFactory = Callable[[PollingSource, Callable[[], None]], Coroutine[Any, Any, None]]


class SourceSet:
    """The running sources.

    Args:
        plan: The sources to run at start.
        runner: Builds the run of one source.
        store: The signal store (a removed source's series are forgotten).
        health: The sources' health (a removed source's entry too).
    """

    def __init__(
        self,
        plan: Sequence[PlannedSource],
        runner: RunnerFactory,
        store: SignalStore,
        health: HealthBoard,
    ) -> None:
        self._plan = {planned.source.name: planned for planned in plan}
        self._runner = runner
        self._store = store
        self._health = health
        self._running: dict[str, tuple[PlannedSource, asyncio.Task[None]]] = {}
        self._changed = asyncio.Event()

    @property
    def names(self) -> list[str]:
        """The sources of the plan in force, in order."""
        return list(self._plan)

    def replace(self, plan: Sequence[PlannedSource]) -> None:
        """Run ``plan`` from now on (applied by :meth:`run` at once)."""
        self._plan = {planned.source.name: planned for planned in plan}
        self._changed.set()

    async def run(self, started: Callable[[], None]) -> None:
        """Run every source; report ``started`` once each has made its first attempt."""
        first = {name: asyncio.Event() for name in self._plan}
        try:
            for name, planned in self._plan.items():
                self._start(planned, first[name].set)
            await _all_set(first.values(), self._running)
            started()
            while True:
                await self._wait_for_change()
                self._changed.clear()
                await self._apply()
        finally:
            await self._stop(list(self._running))

    async def _wait_for_change(self) -> None:
        """Until a new plan comes; a runner that ends meanwhile raises (its crash, or why)."""
        change = asyncio.ensure_future(self._changed.wait())
        try:
            tasks = {task for _, task in self._running.values()}
            done, _ = await asyncio.wait({change, *tasks}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            change.cancel()
        for task in done - {change}:
            task.result()  # a crash raises here
            message = f"the source task {task.get_name()} ended"
            raise RuntimeError(message)

    async def _apply(self) -> None:
        stale = [
            name
            for name, (planned, _) in self._running.items()
            if self._plan.get(name) is None or self._plan[name].settings != planned.settings
        ]
        await self._stop(stale)
        for name in stale:
            if name not in self._plan:
                self._store.forget_source(name)
                self._health.forget(name)
        for name, planned in self._plan.items():
            if name not in self._running:
                self._start(planned, lambda: None)
        if stale or len(self._running) != len(self._plan):
            log.info("sources reloaded", extra={"restarted": stale, "running": self.names})

    def _start(self, planned: PlannedSource, started: Callable[[], None]) -> None:
        name = planned.source.name
        task = asyncio.create_task(self._runner(planned.source, started), name=f"{name} poller")
        self._running[name] = (planned, task)

    async def _stop(self, names: Sequence[str]) -> None:
        tasks = [self._running.pop(name)[1] for name in names if name in self._running]
        for task in tasks:
            task.cancel()
        if tasks:
            # wait() does not raise for the children's cancellation, and still lets this
            # task's own cancellation through.
            await asyncio.wait(tasks)


async def _all_set(
    events: Any, running: dict[str, tuple[PlannedSource, asyncio.Task[None]]]
) -> None:
    """Until every event is set; a runner that ends before its first attempt raises."""
    waiting = asyncio.ensure_future(asyncio.gather(*(event.wait() for event in events)))
    try:
        tasks = {task for _, task in running.values()}
        while not waiting.done():
            done, _ = await asyncio.wait({waiting, *tasks}, return_when=asyncio.FIRST_COMPLETED)
            for task in done - {waiting}:
                task.result()
                message = f"the source task {task.get_name()} ended before its first attempt"
                raise RuntimeError(message)
    finally:
        waiting.cancel()
