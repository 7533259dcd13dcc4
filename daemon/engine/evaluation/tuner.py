"""The tuner: each due ``tune`` decision's what-if, run off the event loop, then planned.

The evaluator hands over the ``tune`` decisions of a tick (:meth:`Tuner.submit`, which only
queues them); the tuner's task copies the target's series (milliseconds, on the loop), runs
the round in the what-if worker process (seconds of CPU, never on the loop), and turns the
report into an ordinary intent (:func:`daemon.whatif.tuning.tuned_decision`). That intent goes
through the same planner as any other (envelopes, dwell, budgets, vetoes), then to the router
(freezes, quarantines, approvals): a risky one becomes a proposal that carries its prediction.
Rounds run one at a time, one per (policy, target) waiting at most; the last report of each is
kept for ``explain``, which may also ask for a round now (:meth:`Tuner.explained`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from daemon.core.clock import Clock
from daemon.core.settings import GovernorConfig
from daemon.engine.evaluation.policy_ledger import PolicyLedger
from daemon.engine.runtime.supervisor import EternalTask, Readiness
from daemon.policy.decisions import Decision, DecisionKind
from daemon.policy.evaluate import tune_question
from daemon.policy.planner import plan
from daemon.policy.spec import PolicySpec
from daemon.policy.tick import StateKey, vetoes_in_force
from daemon.sources.store import SignalStore
from daemon.whatif.errors import WhatIfError
from daemon.whatif.planning import WhatIfReport
from daemon.whatif.rounds import Round
from daemon.whatif.series_snapshot import snapshot
from daemon.whatif.tuning import (
    counterfactual,
    failed_decision,
    question_of_tune,
    tuned_decision,
)
from daemon.whatif.worker import plan_off_loop

log = logging.getLogger(__name__)

PlanRound = Callable[[Round], Awaitable[WhatIfReport]]


class Tuner:
    """Runs tune policies' what-if rounds in a worker process and plans their picks."""

    def __init__(
        self,
        config: Callable[[], GovernorConfig],
        store: SignalStore,
        clock: Clock,
        ledger: PolicyLedger,
        registry: CollectorRegistry,
        *,
        knobs: Callable[[], Mapping[str, Mapping[str, float]]],
        specs: Callable[[], Sequence[PolicySpec]],
        route: Callable[[Sequence[Decision]], Sequence[Decision]],
        plan_round: PlanRound = plan_off_loop,
    ) -> None:
        self._config = config
        self._store = store
        self._knobs = knobs
        self._clock = clock
        self._ledger = ledger
        self._specs = specs
        self._route = route
        self._plan_round = plan_round
        self._queue: asyncio.Queue[Decision] = asyncio.Queue()
        self._waiting: set[StateKey] = set()
        self._one_at_a_time = asyncio.Lock()
        self.last_reports: dict[StateKey, tuple[float, WhatIfReport]] = {}
        self._rounds = Counter(
            "vllm_governor_tune_rounds",
            "What-if rounds of tune policies, by outcome (intent, no_gain, whatif_failed).",
            ["policy", "target", "outcome"],
            registry=registry,
        )
        self._cpu = Histogram(
            "vllm_governor_tune_round_cpu_seconds",
            "CPU seconds one what-if round of a tune policy took in the worker process.",
            registry=registry,
            buckets=(0.5, 1, 2, 5, 10, 20, 40, 80, 120),
        )

    def submit(self, decisions: Sequence[Decision]) -> None:
        """Queue the ``tune`` decisions of a tick (never blocks; one waiting per pair)."""
        for decision in decisions:
            key = (decision.policy, decision.target)
            if decision.kind is DecisionKind.TUNE and key not in self._waiting:
                self._waiting.add(key)
                self._queue.put_nowait(decision)

    def tasks(self) -> list[EternalTask]:
        """The planner of tune rounds."""
        return [EternalTask("tune planner", self._run)]

    async def _run(self, readiness: Readiness) -> None:
        readiness.started()
        while True:
            decision = await self._queue.get()
            try:
                await self.run_one(decision)
            finally:
                self._waiting.discard((decision.policy, decision.target))

    async def run_one(self, decision: Decision) -> list[Decision]:
        """One round for one ``tune`` decision; returns the decisions it recorded."""
        answer = await self._answer(decision)
        outcome = answer.guard or "intent"
        self._rounds.labels(policy=decision.policy, target=decision.target, outcome=outcome).inc()
        if answer.kind is not DecisionKind.INTENT:
            self._record([answer])
            return [answer]
        now = self._clock.monotonic()
        config = self._config()
        vetoes = vetoes_in_force(self._specs(), self._ledger.states, config.target_names())
        result = plan([answer], config.envelopes(), self._ledger.history, now, vetoes)
        self._record([*result.accepted, *result.blocked])
        blocked = list(self._route(result.accepted))
        self._record(blocked)
        return [*result.accepted, *result.blocked, *blocked]

    async def explained(self, name: str, answer: dict[str, Any], *, fresh: bool) -> None:
        """Add a tune policy's what-if to ``explain``'s answer, per target (``tune``).

        The last round's candidates and predictions, or with ``fresh`` a round run now (in
        the worker, as any round; nothing is planned or proposed from it). Any other
        policy's answer is left as it is.
        """
        spec = next((s for s in self._specs() if s.name == name), None)
        if spec is None or spec.action is None or spec.action.tune is None:
            return
        question = tune_question(spec.action.tune)
        for target, view in answer.get("targets", {}).items():
            if fresh:
                try:
                    await self._round(name, target, question)
                except WhatIfError as exc:
                    view["tune"] = {"question": question, "error": str(exc)}
                    continue
            last = self.last_reports.get((name, target))
            if last is None:
                view["tune"] = {"question": question, "report": None}
                continue
            at, report = last
            view["tune"] = {
                "question": question,
                "age_s": round(self._clock.monotonic() - at, 1),
                "report": report.to_json(),
                "counterfactual": counterfactual(report),
            }

    async def _answer(self, decision: Decision) -> Decision:
        try:
            report = await self._round(decision.policy, decision.target, decision.details["tune"])
        except WhatIfError as exc:
            return failed_decision(decision, str(exc))
        return tuned_decision(decision, report)

    async def _round(self, policy: str, target: str, tune: Mapping[str, Any]) -> WhatIfReport:
        """One round of ``policy``'s question on ``target``; kept as its last report.

        Raises:
            WhatIfError: no such instance, too little data, or the worker failed.
        """
        instance = next((i for i in self._config().vllm if i.name == target), None)
        if instance is None:
            message = f"{target} is not a [[vllm]] instance"
            raise WhatIfError(message)
        async with self._one_at_a_time:
            window_s = float(tune["window_s"])
            now = self._clock.monotonic()
            job = Round(
                instance=instance,
                series=snapshot(self._store, instance.name, now - window_s),
                now=now,
                window_s=window_s,
                in_force=dict(self._knobs().get(instance.name, {})),
                question=question_of_tune(tune),
            )
            report = await self._plan_round(job)
        self._cpu.observe(report.cpu_s)
        self.last_reports[(policy, target)] = (self._clock.monotonic(), report)
        return report

    def _record(self, decisions: Sequence[Decision]) -> None:
        if not decisions:
            return
        self._ledger.record(decisions)
        for decision in decisions:
            log.info(
                "tune round",
                extra={
                    "policy": decision.policy,
                    "target": decision.target,
                    "kind": decision.kind.value,
                    "guard": decision.guard,
                    "changes": decision.intent.changes if decision.intent else None,
                    "reason": decision.details.get("reason")
                    or decision.details.get("whatif", {}).get("reason"),
                },
            )
