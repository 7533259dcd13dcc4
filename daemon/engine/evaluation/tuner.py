"""The tuner: each due ``tune`` decision's what-if, run off the event loop, then planned.

The evaluator hands over the ``tune`` decisions of a tick (:meth:`Tuner.submit`, which only
queues them); the tuner's task copies the target's series (milliseconds, on the loop), runs
the round in the what-if worker process (seconds of CPU, never on the loop), and turns the
report into an ordinary intent (:func:`daemon.whatif.tuning.tuned_decision`). That intent goes
through the same planner as any other (envelopes, dwell, budgets, vetoes), then to the router
(freezes, quarantines, approvals): a risky one becomes a proposal that carries its prediction.
Rounds run one at a time, one per (policy, target) waiting at most; the last report of each is
kept for ``explain``, which may also ask for a round now (:meth:`Tuner.explained`).

Once a tuned change is in force (the knobs read back as the pick), the tuner waits out the
restart and the round's window, measures what the setting really did in the same worker
(:mod:`daemon.whatif.realised`) and records a ``realised`` decision with the prediction's error
(a metric, the audit log, a message to people); a comparable window whose error is beyond the
policy's ``max_error`` quarantines the policy on that target, saying why. What is awaited is
kept in the state store: a governor restarted meanwhile resumes it, its wait started over
(:meth:`daemon.whatif.tuned_effects.Expected.restarted`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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
from daemon.whatif.realised import HISTOGRAMS, Realised, RealisedCheck
from daemon.whatif.rounds import Round
from daemon.whatif.series_snapshot import READ, SeriesSnapshot, snapshot
from daemon.whatif.tuned_effects import EffectWatch, Expected, realised_decision
from daemon.whatif.tuning import (
    counterfactual,
    failed_decision,
    question_of_tune,
    tuned_decision,
    unsettled_decision,
)
from daemon.whatif.worker import (
    measure_in_process,
    measure_off_loop,
    plan_in_process,
    plan_off_loop,
)

log = logging.getLogger(__name__)

PlanRound = Callable[[Round], Awaitable[WhatIfReport]]
MeasureEffect = Callable[[RealisedCheck], Awaitable[Realised]]
SeriesSource = Callable[[str, float, Iterable[str]], SeriesSnapshot]
"""(target, since, names) -> a copy of those series: the signal feed's
:meth:`~daemon.engine.evaluation.signal_feed.SignalFeed.series`."""


@dataclass(frozen=True, slots=True)
class WhatIfRunner:
    """Where rounds and measurements run: the daemon's worker process, or in process.

    In process is for runs on a virtual clock (``simulate``), where a worker process would run
    in real time while the clock jumps (:func:`daemon.whatif.worker.plan_in_process`).
    """

    plan_round: PlanRound
    measure: MeasureEffect


OFF_LOOP = WhatIfRunner(plan_off_loop, measure_off_loop)
"""The daemon's: a worker process per round, bounded in CPU and wall-clock time."""

IN_PROCESS = WhatIfRunner(plan_in_process, measure_in_process)
"""Virtual-time runs': on the loop, taking no virtual time."""

CHECK_INTERVAL_S = 5.0
"""How often tuned changes are looked at: in force yet, and their window passed?

A change counts as in force from the first look at which its knobs read back as the pick, and
is measured at the first look after its downtime and window have passed since: every 30 s,
the measurement came up to a minute late (the demo's three minutes missed it). A look that
finds nothing due compares a few numbers in memory; only a due one runs the worker."""

LATENCIES = tuple(f"{name}_bucket" for name in HISTOGRAMS)
"""The per-request latency histograms a realised effect reads, besides the round's series."""


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
        quarantine: Callable[[str, str, str], None],
        tell: Callable[[Sequence[Decision]], None],
        reply: Callable[[str, str, str], Awaitable[bool]],
        runner: WhatIfRunner = OFF_LOOP,
        series: SeriesSource | None = None,
    ) -> None:
        """Build the stage from its ports.

        ``route`` takes accepted intents (the router); ``quarantine`` stops a policy on a
        target with a reason (the actuation journal's quarantine); ``tell`` takes the
        ``realised`` decisions whose text goes to its channels (MQTT); ``reply`` posts the
        text in the Slack thread of the policy's proposal on the target. ``runner`` says where
        rounds run (:data:`OFF_LOOP` in the daemon, :data:`IN_PROCESS` on a virtual clock).
        ``series`` is where a round's series come from (the signal feed's; by default a copy
        out of ``store``): a backtest's recording says there what it lacks.
        """
        self._config = config
        self._series: SeriesSource = series or (
            lambda target, since, names: snapshot(store, target, since, names)
        )
        self._knobs = knobs
        self._clock = clock
        self._ledger = ledger
        self._specs = specs
        self._route = route
        self._quarantine = quarantine
        self._tell = tell
        self._reply = reply
        self._plan_round = runner.plan_round
        self._measure_off_loop = runner.measure
        self._effects = EffectWatch(ledger.keep_effects)
        self._queue: asyncio.Queue[Decision] = asyncio.Queue()
        self._waiting: set[StateKey] = set()
        self._one_at_a_time = asyncio.Lock()
        self.last_reports: dict[StateKey, tuple[float, WhatIfReport]] = {}
        self._rounds = Counter(
            "vllm_governor_tune_rounds",
            "What-if rounds of tune policies, by outcome "
            "(intent, no_gain, whatif_failed, unsettled).",
            ["policy", "target", "outcome"],
            registry=registry,
        )
        self._errors = Gauge(
            "vllm_governor_tune_prediction_error",
            "Goodput prediction error of the last tuned change measured on each target "
            "(realised over predicted SLO attainment, minus one).",
            ["policy", "target"],
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
        """The planner of tune rounds, and the checker of tuned changes' effects."""
        return [
            EternalTask("tune planner", self._run),
            EternalTask("tuned change checker", self._check_forever),
        ]

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
        window_s = float(decision.details["tune"]["window_s"])
        unsettled = self._unsettled(decision.target, window_s)
        if unsettled is not None:
            answer = unsettled_decision(decision, unsettled)
        else:
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
        stopped = {(d.policy, d.target) for d in blocked}
        for accepted in result.accepted:
            if (accepted.policy, accepted.target) not in stopped:
                self._effects.expect(accepted, now)
        return [*result.accepted, *result.blocked, *blocked]

    def _unsettled(self, target: str, window_s: float) -> str | None:
        """Why ``target``'s recent metrics cannot answer a round now, or None.

        A tuned change awaiting its measurement (approved, restarting, or in its window) would
        have its measurement spoilt by a second restart; and a window that holds a change
        describes two settings at once. On the CPU profile's shifting day a second policy's
        round ran 2 minutes after the first one's restart, on 10 minutes mostly of the old
        setting, and restarted the server again 6 minutes after it.
        """
        awaited = [e for e in self._effects.waiting() if e.target == target]
        if awaited:
            return (
                f"{awaited[0].policy}'s tuned change of {target} awaits its measurement: one "
                "tuned change at a time"
            )
        now = self._clock.monotonic()
        changes = [
            history.last_change_at
            for (knob_target, _knob), history in self._ledger.history.items()
            if knob_target == target and history.last_change_at is not None
        ]
        if changes and now - max(changes) < window_s:
            ago = now - max(changes)
            return (
                f"{target} changed {ago:.0f} s ago: the round's {window_s:.0f} s window would "
                "hold the setting before it too"
            )
        return None

    def expect_effect(self, accepted: Decision) -> None:
        """Await the effect of a tuned intent handed on (``run_one`` does it for its own)."""
        self._effects.expect(accepted, self._clock.monotonic())

    def resume_effects(self) -> None:
        """Await the tuned changes a previous run awaited (the checker does it as it starts)."""
        self._effects.resume(self._ledger.saved_effects())

    async def _check_forever(self, readiness: Readiness) -> None:
        self.resume_effects()
        readiness.started()
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            await self.check_effects()

    async def check_effects(self) -> list[Decision]:
        """Measure each tuned change whose window has passed since it came into force."""
        now = self._clock.monotonic()
        due = self._effects.due(self._knobs(), now)
        measured = [await self._measure(expected, now) for expected in due]
        return [decision for decision in measured if decision is not None]

    async def _measure(self, expected: Expected, now: float) -> Decision | None:
        window_s = expected.window_s
        try:
            check = RealisedCheck(
                series=self._series(expected.target, now - window_s, (*READ, *LATENCIES)),
                instance=expected.target,
                now=now,
                window_s=window_s,
                slo=expected.slo,
            )
            async with self._one_at_a_time:
                realised = await self._measure_off_loop(check)
        except WhatIfError as exc:
            log.warning(
                "a tuned change's effect could not be measured",
                extra={"policy": expected.policy, "target": expected.target, "error": str(exc)},
            )
            return None
        decision = realised_decision(expected, realised, now)
        details = decision.details
        self._errors.labels(policy=expected.policy, target=expected.target).set(
            details["goodput_error"]
        )
        if details["quarantined"]:
            self._quarantine(expected.policy, expected.target, details["why"])
        self._record([decision])
        self._tell([decision])
        await self._reply(expected.policy, expected.target, details["text"])
        return decision

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
                series=self._series(instance.name, now - window_s, READ),
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
