"""One kind of actuator at work: its targets, its queue of changes, its runner and its reader.

The *runner* (``{task} runner``: ``actuation runner``, ``log level runner``) first finishes
what a previous governor left open in the journal, target by target, then applies queued
changes, each as a child task of its own task group; the actuator serialises changes per
target. A change that crashes is reconciled at once, as the next start would, so that its
target is not left half changed. A reconcile that is deferred (refused: the change stays
open) is tried again on a schedule while the runner applies other targets' changes
(:mod:`daemon.engine.actuation.reconcile_retries`), not left for the next start. The
*reader* (``{task} reader``) exists for a kind that declares a poll interval: it refreshes
every target's knobs, so that :meth:`KindRunner.knobs` says what is in force (an old or
failed reading is no value at all).
Outcomes go to ``report``: counted, logged, quarantined on a revert, like any other kind's.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from typing import Generic

from daemon.core.actuation import FAILED, ActuationResult, ChangeRequest
from daemon.core.actuator_kinds import Actuator, ActuatorKind, TargetT
from daemon.core.settings import GovernorConfig
from daemon.engine.actuation.reconcile_retries import DeferredReconcile, ReconcileRetries
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
        retries: ReconcileRetries,
    ) -> None:
        """``report`` hears every outcome, reconciliations included.

        ``retries`` schedules the reconciles that are deferred, and says which wait.
        """
        self.kind = kind
        self.actuator = actuator
        self._config = config
        self._report = report
        self._retries = retries
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

    def deferred(self) -> list[DeferredReconcile]:
        """The reconciles of this kind's targets that wait for their next try."""
        return self._retries.deferred()

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
        targets = self.targets()
        async with asyncio.TaskGroup() as group:
            started = {
                name: group.create_task(self._reconcile(target), name=f"reconcile {name}")
                for name, target in targets.items()
            }
        async with asyncio.TaskGroup() as group:
            for name, task in started.items():
                if (result := task.result()) is not None and self._retries.is_deferred(result):
                    group.create_task(
                        self._retry(targets[name], result), name=f"reconcile retry {name}"
                    )
            while True:
                target, request, outcome = await self._queue.get()
                group.create_task(
                    self._apply(target, request, outcome), name=f"change {target.name}"
                )

    async def _reconcile(self, target: TargetT) -> ActuationResult | None:
        try:
            result = await self.actuator.reconcile(target)
        except Exception:
            log.exception("reconciling failed", extra={"target": target.name})
            return None
        if result is not None:
            self._report(result)
        return result

    async def _retry(self, target: TargetT, deferred: ActuationResult) -> None:
        await self._retries.until_finished(
            target.name, deferred, functools.partial(self._reconcile, target)
        )

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
            reconciled = await self._reconcile(target)
            result = ActuationResult(
                request.target, request.policy, FAILED, f"the change crashed: {exc}"
            )
            if outcome is not None and not outcome.done():
                outcome.set_result(result)
            if reconciled is not None and self._retries.is_deferred(reconciled):
                await self._retry(target, reconciled)
            return
        self._report(result)
        if outcome is not None and not outcome.done():
            outcome.set_result(result)
        await self.actuator.refresh(target)  # the policies see the new value at their next tick
