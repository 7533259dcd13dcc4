"""One kind of actuator at work: its targets, its queue of changes, its runner and its reader.

The *runner* (``{task} runner``: ``actuation runner``, ``log level runner``) first finishes
what a previous governor left open in the journal, target by target, then applies queued
changes, each as a child task of its own task group; the actuator serialises changes per
target. A change that crashes is reconciled at once, as the next start would, so that its
target is not left half changed. The *reader* (``{task} reader``) exists for a kind that
declares a poll interval: it refreshes every target's knobs, so that
:meth:`KindRunner.knobs` says what is in force (an old or failed reading is no value at all).
Outcomes go to ``report``: counted, logged, quarantined on a revert, like any other kind's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Generic

from daemon.core.actuation import FAILED, ActuationResult, ChangeRequest
from daemon.core.actuator_kinds import Actuator, ActuatorKind, TargetT
from daemon.core.settings import GovernorConfig
from daemon.engine.runtime.supervisor import EternalTask, Readiness

log = logging.getLogger(__name__)

DEFAULT_POLL_S = 15.0  # how long the reader waits while its kind has no target


class KindRunner(Generic[TargetT]):
    """Owns one kind's actuator and the queue of changes its runner carries out."""

    def __init__(
        self,
        kind: ActuatorKind[TargetT],
        actuator: Actuator[TargetT],
        config: Callable[[], GovernorConfig],
        report: Callable[[ActuationResult], None],
    ) -> None:
        """``report`` hears every outcome, reconciliations included."""
        self.kind = kind
        self.actuator = actuator
        self._config = config
        self._report = report
        # A change for the runner, with where to put its outcome when someone waits for it.
        self._queue: asyncio.Queue[
            tuple[TargetT, ChangeRequest, asyncio.Future[ActuationResult] | None]
        ] = asyncio.Queue()

    def targets(self) -> dict[str, TargetT]:
        """The targets this kind changes in the configuration in force, by name."""
        return {target.name: target for target in self.kind.targets(self._config())}

    def tasks(self) -> list[EternalTask]:
        """The runner, and the reader when the kind's knobs are polled."""
        tasks = [EternalTask(f"{self.kind.task} runner", self._run)]
        if self.kind.poll_interval_s is not None:
            tasks.append(EternalTask(f"{self.kind.task} reader", self._read_forever))
        return tasks

    def knobs(self) -> dict[str, Mapping[str, float]]:
        """Each target's knob values in force, where they are known."""
        known: dict[str, Mapping[str, float]] = {}
        for name, target in self.targets().items():
            if values := self.actuator.current_knobs(target):
                known[name] = values
        return known

    def enqueue(
        self,
        target: TargetT,
        request: ChangeRequest,
        outcome: asyncio.Future[ActuationResult] | None = None,
    ) -> None:
        """Queue a change for the runner; ``outcome`` gets its result when someone waits."""
        self._queue.put_nowait((target, request, outcome))

    async def _read_forever(self, readiness: Readiness) -> None:
        interval_of = self.kind.poll_interval_s
        assert interval_of is not None  # the reader exists only for a polled kind
        readiness.started()
        while True:
            targets = self.targets()
            async with asyncio.TaskGroup() as group:
                for name, target in targets.items():
                    group.create_task(self.actuator.refresh(target), name=f"read {name}")
            interval = min((interval_of(t) for t in targets.values()), default=DEFAULT_POLL_S)
            await asyncio.sleep(interval)

    async def _run(self, readiness: Readiness) -> None:
        readiness.started()
        async with asyncio.TaskGroup() as group:
            for name, target in self.targets().items():
                group.create_task(self._reconcile(target), name=f"reconcile {name}")
        async with asyncio.TaskGroup() as group:
            while True:
                target, request, outcome = await self._queue.get()
                group.create_task(
                    self._apply(target, request, outcome), name=f"change {target.name}"
                )

    async def _reconcile(self, target: TargetT) -> None:
        try:
            result = await self.actuator.reconcile(target)
        except Exception:
            log.exception("reconciling failed", extra={"target": target.name})
            return
        if result is not None:
            self._report(result)

    async def _apply(
        self,
        target: TargetT,
        request: ChangeRequest,
        outcome: asyncio.Future[ActuationResult] | None,
    ) -> None:
        try:
            result = await self.actuator.apply(target, request)
        except Exception as exc:
            # A bug in one change must not stop the others, nor the daemon. Its journal entry
            # is still open: reconcile it now, as the next start would, so that the target is
            # not left on a change it does not run.
            log.exception("a change crashed; reconciling it", extra={"target": target.name})
            await self._reconcile(target)
            result = ActuationResult(
                request.target, request.policy, FAILED, f"the change crashed: {exc}"
            )
            if outcome is not None and not outcome.done():
                outcome.set_result(result)
            return
        self._report(result)
        if outcome is not None and not outcome.done():
            outcome.set_result(result)
        await self.actuator.refresh(target)  # the policies see the new value at their next tick
