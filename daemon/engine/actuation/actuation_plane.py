"""The actuation plane: the journals, one runner per routed actuator kind, and what they report.

The governor hands the plane the table of actuator kinds
(:class:`~daemon.core.actuator_kinds.ActuatorKind`); the plane builds each kind's actuator
from the services it lends (the journal, the signal windows, the clock, the freeze files, the
gates, the gates' cap journal) and, for a kind that policies' intents are routed to, a
:class:`~daemon.engine.actuation.kind_runner.KindRunner`. A kind that is not routed (the
admission gate) is driven by a control loop of the engine, which gets its actuator from
:meth:`ActuationPlane.driven`: built here, from the same table and the same services. The evaluator
calls :meth:`ActuationPlane.knobs` each tick (the current knob values, as each kind knows
them) and the router hands :meth:`ActuationPlane.enqueue` the changes routed to a kind. Each
outcome, whatever its kind, is logged, counted, journaled (by the actuator) and, for a change
that changed its target, entered in the knob's history (dwell and budgets); a reverted change
quarantines its policy on that target and raises an alert.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from daemon.core.actuation import APPLIED_STATES, REFUSED, ActuationResult, ChangeRequest
from daemon.core.actuator_kinds import Actuator, ActuatorKind, ActuatorServices, Target
from daemon.core.batch_hold import BatchHold, no_batch_hold
from daemon.core.clock import Clock
from daemon.core.freeze_sources import NO_FREEZE_SOURCE, FreezeSource
from daemon.core.restart_slots import NO_RESTART_SLOTS, RestartSlots
from daemon.core.settings import GovernorConfig
from daemon.engine.actuation.haproxy_gate import gate_of
from daemon.engine.actuation.kind_runner import KindRunner
from daemon.engine.actuation.reconcile_retries import (
    DEFAULT_RETRY_DELAYS,
    ReconcileRetries,
    RetryDelays,
)
from daemon.engine.actuation.routing import Owner, request_of, route
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.evaluation.signal_windows import StoreSignalWindows
from daemon.engine.runtime.supervisor import EternalTask
from daemon.engine.storage.cap_journal import SqliteCapJournal
from daemon.engine.storage.journal_store import SqliteJournal
from daemon.policy.decisions import Decision, DecisionKind, Evidence

log = logging.getLogger(__name__)


class ActuationPlane:
    """Owns the journals and one runner per routed actuator kind, and reports their outcomes."""

    def __init__(
        self,
        config: Callable[[], GovernorConfig],
        signals: SignalPlane,
        clock: Clock,
        registry: CollectorRegistry,
        state_path: Path,
        *,
        kinds: Sequence[ActuatorKind[Any]],
        on_applied: Callable[[ActuationResult], None],
        record: Callable[[Sequence[Decision]], None],
        batches: BatchHold = no_batch_hold,
        fleet_freeze: FreezeSource = NO_FREEZE_SOURCE,
        restart_slots: RestartSlots = NO_RESTART_SLOTS,
        reconcile_retry: RetryDelays = DEFAULT_RETRY_DELAYS,
    ) -> None:
        """The journal at ``state_path`` and an actuator of each kind in ``kinds``.

        ``on_applied`` hears every change that changed its target (the knobs' histories);
        ``record`` takes decisions made here (the alert of a revert) for the decision log.
        ``fleet_freeze`` is lent to the actuators: the fleet's freeze, for their preflight;
        ``restart_slots`` too: the fleet's disruption budget, taken before a restart.
        ``batches`` closes a target's batch lane before a restart (lent to the actuators).
        ``reconcile_retry``: how a deferred reconcile is tried again while the governor runs.
        """
        self._config = config
        self._clock = clock
        self.journal = SqliteJournal(state_path, clock)
        self.caps = SqliteCapJournal(state_path, clock)
        self.windows = StoreSignalWindows(signals)
        services = ActuatorServices(
            self.journal,
            self.windows,
            clock,
            config().governor.state_dir,
            gate_of,
            batches,
            fleet_freeze=fleet_freeze,
            restart_slots=restart_slots,
            caps=self.caps,
            gate_caps=gate_of,
        )
        self._runners: list[KindRunner[Any]] = [
            KindRunner(
                kind,
                kind.factory(services),
                config,
                self._report,
                ReconcileRetries(clock, reconcile_retry),
            )
            for kind in kinds
            if kind.routed
        ]
        self._driven: list[tuple[ActuatorKind[Any], Actuator[Any]]] = [
            (kind, kind.factory(services)) for kind in kinds if not kind.routed
        ]
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

    def close(self) -> None:
        """Close the journals."""
        self.journal.close()
        self.caps.close()

    def tasks(self) -> list[EternalTask]:
        """Each kind's runner (and its reader, when its knobs are polled)."""
        return [task for runner in self._runners for task in runner.tasks()]

    def driven(self, knob: str) -> tuple[ActuatorKind[Any], Actuator[Any]] | None:
        """The kind (and its actuator) that a control loop drives to move ``knob``, if any.

        The admission loop asks for ``gate_cap``: the first kind of the table that is not
        routed and takes that knob. Its changes go through the actuator's own ``apply``, with
        every check of its preflight, as a routed change does.
        """
        return next(
            ((kind, actuator) for kind, actuator in self._driven if knob in (kind.knobs or ())),
            None,
        )

    def owners(self) -> dict[str, Owner]:
        """Every target an actuator changes now, by name: the first kind of the table wins."""
        owners: dict[str, Owner] = {}
        for runner in self._runners:
            for name, target in runner.targets().items():
                owners.setdefault(name, Owner(runner.kind, target))
        return owners

    def knobs(self) -> dict[str, Mapping[str, float]]:
        """Current knob values per target, as its kind knows them (files, or the last read)."""
        known: dict[str, Mapping[str, float]] = {}
        for runner in self._runners:
            for name, values in runner.knobs().items():
                known.setdefault(name, values)
        return known

    def enqueue(self, owner: Owner, request: ChangeRequest) -> None:
        """Queue an automatic change for its kind's runner (its outcome is reported)."""
        self._runner_of(owner).enqueue(owner.target, request)

    async def apply_approved(self, target: Target, request: ChangeRequest) -> ActuationResult:
        """Run an approved change on the same path as automatic ones; wait for its outcome.

        The change goes on its kind's runner's queue, so the actuator's every check (mode,
        envelope, budget, dwell, freeze, one change in flight) applies to it as well.
        """
        owner = self.owners().get(target.name)
        if owner is None:
            return ActuationResult(
                request.target, request.policy, REFUSED, "no actuator: observed only"
            )
        outcome: asyncio.Future[ActuationResult] = asyncio.get_running_loop().create_future()
        self._runner_of(owner).enqueue(owner.target, request, outcome)
        return await outcome

    async def dry_runs(self, decisions: Sequence[Decision]) -> list[dict[str, Any]]:
        """Plan each decision without side effects (``apply --dry-run``): what would be done."""
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
            routing = route([decision], self.owners(), {})
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
            # Not blocked: the target has an owner, and the intent goes to it (or to approval).
            owner = self.owners()[decision.target]
            actuator = self._runner_of(owner).actuator
            result = await actuator.apply(owner.target, request_of(decision), dry_run=True)
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
                    "forecast": None if entry.forecast is None else dict(entry.forecast),
                }
                for entry in self.journal.recent(10)
            ],
            "quarantined": [
                {"policy": policy, "target": target, "reason": reason}
                for (policy, target), reason in self.journal.quarantined().items()
            ],
            "reconciles_deferred": [
                deferral.to_status() for runner in self._runners for deferral in runner.deferred()
            ],
        }

    def _runner_of(self, owner: Owner) -> KindRunner[Any]:
        return next(runner for runner in self._runners if runner.kind is owner.kind)

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
