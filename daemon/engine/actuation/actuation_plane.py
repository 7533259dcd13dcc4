"""The actuation plane: the journal, the gate's routing, and the actuation runner.

The evaluator calls :meth:`ActuationPlane.knobs` each tick (the current knob values, read from
each server's files) and :meth:`ActuationPlane.submit` with the intents the planner accepted.
Auto-risk changes go on a queue that the *actuation runner* consumes. On start the runner first
reconciles every server from the journal (a change left open by a governor that died is
finished or reverted), then applies queued changes, each as a child task of its own task group;
the actuator serialises changes per server. Each outcome is logged, counted, journaled (by the
actuator) and, for a change that restarted the server, entered in the knob's history (dwell
and budgets); a reverted change quarantines its policy on that server and raises an alert.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from daemon.core.actuation import (
    APPLIED_STATES,
    FAILED,
    REFUSED,
    ActuationJournal,
    ActuationResult,
    Actuator,
    ChangeRequest,
    SignalWindows,
)
from daemon.core.clock import Clock
from daemon.core.gate_drain import GateLookup
from daemon.core.settings import GovernorConfig, VllmInstance
from daemon.engine.actuation.haproxy_gate import gate_of
from daemon.engine.actuation.log_level_plane import LogLevelFactory, LogLevelPlane
from daemon.engine.actuation.routing import request_of, route
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.evaluation.signal_windows import StoreSignalWindows
from daemon.engine.runtime.supervisor import EternalTask, Readiness
from daemon.engine.storage.journal_store import SqliteJournal
from daemon.policy.decisions import Decision, DecisionKind, Evidence

log = logging.getLogger(__name__)

# journal, windows, clock, freeze directory, the gate in front of an instance -> the actuator.
ActuatorFactory = Callable[[ActuationJournal, SignalWindows, Clock, Path, GateLookup], Actuator]
# A change for the runner, with where to put its outcome when someone waits for it.
Queued = tuple[VllmInstance, ChangeRequest, "asyncio.Future[ActuationResult] | None"]


class ActuationPlane:
    """Owns the journal and the actuator, and runs the changes."""

    def __init__(
        self,
        config: Callable[[], GovernorConfig],
        signals: SignalPlane,
        clock: Clock,
        registry: CollectorRegistry,
        state_path: Path,
        *,
        factory: ActuatorFactory | None,
        log_level_factory: LogLevelFactory | None = None,
        on_applied: Callable[[ActuationResult], None],
        record: Callable[[Sequence[Decision]], None],
    ) -> None:
        """The journal at ``state_path`` and the actuators the factories build.

        ``on_applied`` hears every change that restarted a server (the knobs' histories);
        ``record`` takes decisions made here (the alert of a revert) for the decision log.
        """
        self._config = config
        self._clock = clock
        self.journal = SqliteJournal(state_path, clock)
        self.windows = StoreSignalWindows(signals)
        state_dir = config().governor.state_dir
        self.actuator = (
            None
            if factory is None
            else factory(self.journal, self.windows, clock, state_dir, gate_of)
        )
        self._queue: asyncio.Queue[Queued] = asyncio.Queue()
        self._changes = Counter(
            "vllm_governor_actuations",
            "Changes of vLLM servers by target and final state.",
            ["target", "state"],
            registry=registry,
        )
        self._refusals = Counter(
            "vllm_governor_actuation_refusals",
            "Checks that refused a change of a vLLM server, by target and check (envelope, "
            "budget, freeze, in_flight...): one count per check that said no.",
            ["target", "guard"],
            registry=registry,
        )
        self._on_applied = on_applied
        self._record = record
        # Live log levels of other services, on the same journal, reported like vLLM changes.
        self.live = (
            None
            if log_level_factory is None
            else LogLevelPlane(
                lambda: self._config().http_log_level,
                log_level_factory(self.journal, clock, state_dir),
                clock,
                self._report,
            )
        )

    def close(self) -> None:
        """Close the journal."""
        self.journal.close()

    def tasks(self) -> list[EternalTask]:
        """The actuation runner, when there is an actuator; the log-level tasks, when any."""
        live = [] if self.live is None else self.live.tasks()
        if self.actuator is None:
            return live
        return [EternalTask("actuation runner", self._run), *live]

    def knobs(self) -> dict[str, Mapping[str, float]]:
        """Current knob values per server, as its files set them (and live levels as read)."""
        live = {} if self.live is None else self.live.knobs()
        if self.actuator is None:
            return live
        return {
            instance.name: self.actuator.current_knobs(instance)
            for instance in self._config().vllm
            if instance.config_path is not None
        } | live

    def enqueue(self, instance: VllmInstance, request: ChangeRequest) -> None:
        """Queue an automatic change for the runner (its outcome is reported, not awaited)."""
        self._queue.put_nowait((instance, request, None))

    async def apply_approved(
        self, instance: VllmInstance, request: ChangeRequest
    ) -> ActuationResult:
        """Run an approved change on the same path as automatic ones; wait for its outcome.

        The change goes on the actuation runner's queue, so the actuator's every check
        (mode, envelope, budget, dwell, freeze, one change in flight) applies to it as well.
        """
        if self.actuator is None:
            return ActuationResult(
                request.target, request.policy, REFUSED, "no actuator: observed only"
            )
        outcome: asyncio.Future[ActuationResult] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((instance, request, outcome))
        return await outcome

    async def dry_runs(self, decisions: Sequence[Decision]) -> list[dict[str, Any]]:
        """Plan each decision without side effects (``apply --dry-run``): what would be done."""
        instances = {instance.name: instance for instance in self._config().vllm}
        answers: list[dict[str, Any]] = []
        for decision in decisions:
            if decision.kind is not DecisionKind.INTENT:
                reason = str(decision.details.get("reason", ""))
                answers.append(
                    {
                        "target": decision.target,
                        "state": "blocked",
                        "outcome": f"{decision.guard}: {reason}",
                        "refusals": [[decision.guard, reason]],
                        "plan": {},
                    }
                )
                continue
            live = None if self.live is None else self.live.by_name()
            routing = route(
                [decision], instances, {}, actuated=self.actuator is not None, live=live
            )
            if routing.blocked:
                blocked = routing.blocked[0]
                reason = blocked.details["reason"]
                answers.append(
                    {
                        "target": decision.target,
                        "state": "blocked",
                        "outcome": reason,
                        "refusals": [[blocked.guard, reason]],
                        "plan": {},
                    }
                )
                continue
            if self.live is not None and decision.target in self.live.by_name():
                target = self.live.by_name()[decision.target]
                result = await self.live.actuator.apply(target, request_of(decision), dry_run=True)
            else:
                assert self.actuator is not None
                instance = instances[decision.target]
                result = await self.actuator.apply(instance, request_of(decision), dry_run=True)
            answers.append(
                {
                    "target": result.target,
                    "state": result.state,
                    "outcome": result.outcome,
                    "refusals": [list(refusal) for refusal in result.refusals],
                    "risk": decision.intent.risk if decision.intent else "",
                    "plan": dict(result.plan),
                }
            )
        return answers

    def status(self) -> dict[str, Any]:
        """Recent changes and quarantined policies, for ``status``."""
        return {
            "actuations": [
                {
                    "id": entry.id,
                    "target": entry.target,
                    "policy": entry.policy,
                    "state": entry.state,
                    "step": entry.step,
                    "outcome": entry.outcome,
                    "timings": dict(entry.timings),
                }
                for entry in self.journal.recent(10)
            ],
            "quarantined": [
                {"policy": policy, "target": target, "reason": reason}
                for (policy, target), reason in self.journal.quarantined().items()
            ],
        }

    async def _run(self, readiness: Readiness) -> None:
        assert self.actuator is not None
        readiness.started()
        async with asyncio.TaskGroup() as group:
            for instance in self._config().vllm:
                if instance.config_path is not None:
                    group.create_task(self._reconcile(instance), name=f"reconcile {instance.name}")
        async with asyncio.TaskGroup() as group:
            while True:
                instance, request, outcome = await self._queue.get()
                group.create_task(
                    self._apply(instance, request, outcome), name=f"change {instance.name}"
                )

    async def _reconcile(self, instance: VllmInstance) -> None:
        assert self.actuator is not None
        try:
            result = await self.actuator.reconcile(instance)
        except Exception:
            log.exception("reconciling failed", extra={"target": instance.name})
            return
        if result is not None:
            self._report(result)

    async def _apply(
        self,
        instance: VllmInstance,
        request: ChangeRequest,
        outcome: asyncio.Future[ActuationResult] | None,
    ) -> None:
        assert self.actuator is not None
        try:
            result = await self.actuator.apply(instance, request)
        except Exception as exc:
            # A bug in one change must not stop the others, nor the daemon. Its journal entry
            # is still open: reconcile it now, as the next start would, so that the server is
            # not left on files it does not run.
            log.exception("a change crashed; reconciling it", extra={"target": instance.name})
            await self._reconcile(instance)
            result = ActuationResult(
                request.target, request.policy, FAILED, f"the change crashed: {exc}"
            )
            if outcome is not None and not outcome.done():
                outcome.set_result(result)
            return
        self._report(result)
        if outcome is not None and not outcome.done():
            outcome.set_result(result)

    def _report(self, result: ActuationResult) -> None:
        self._changes.labels(target=result.target, state=result.state).inc()
        for guard, _why in result.refusals:
            self._refusals.labels(target=result.target, guard=guard).inc()
        log.info(
            "change outcome",
            extra={
                "target": result.target,
                "policy": result.policy,
                "state": result.state,
                "outcome": result.outcome,
                "timings": dict(result.timings),
                "entry": result.entry_id,
            },
        )
        if result.state in APPLIED_STATES:
            self._on_applied(result)
        if result.quarantine:
            self.journal.quarantine(result.policy, result.target, result.outcome, result.entry_id)
            log.error(
                "ALERT: a change was reverted; its policy is quarantined on this server",
                extra={"policy": result.policy, "target": result.target, "outcome": result.outcome},
            )
            alert = Decision(
                policy=result.policy,
                target=result.target,
                at=self._clock.monotonic(),
                kind=DecisionKind.ALERT,
                evidence=Evidence("verification", {}, note=result.outcome),
                details={"actuation": result.entry_id, "state": result.state, "quarantined": True},
            )
            self._record([alert])
