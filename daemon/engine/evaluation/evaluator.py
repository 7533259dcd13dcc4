"""The evaluator: every ``evaluation_interval_s``, what the sources see goes through the policies.

Each tick builds one view per vLLM target from its signal feed (the daemon's: the signal plane's
rows; a backtest's: recorded views), runs the pure :func:`~daemon.policy.tick.tick`, persists
the states that changed and the decisions, and logs each decision once. Its collaborators are
ports given at construction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from daemon.core.clock import Clock
from daemon.core.settings import GovernorConfig
from daemon.engine.evaluation.policy_ledger import PolicyLedger
from daemon.engine.evaluation.policy_set import PolicySet
from daemon.engine.evaluation.signal_feed import SignalFeed
from daemon.engine.runtime.supervisor import Readiness
from daemon.policy.decisions import Decision, DecisionKind
from daemon.policy.evaluate import TargetView
from daemon.policy.state import PolicyState
from daemon.policy.tick import StateKey, TickResult, tick

log = logging.getLogger(__name__)


@dataclass
class EvaluatorMetrics:
    """Counters of the evaluator."""

    ticks: Histogram
    decisions: Counter
    errors: Gauge

    @classmethod
    def register(cls, registry: CollectorRegistry) -> EvaluatorMetrics:
        """Create them in ``registry``."""
        return cls(
            Histogram(
                "vllm_governor_evaluation_seconds",
                "Time one evaluation of every policy took.",
                registry=registry,
                buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            ),
            Counter(
                "vllm_governor_decisions",
                "Decisions by policy, kind and guard.",
                ["policy", "kind", "guard"],
                registry=registry,
            ),
            Gauge(
                "vllm_governor_policy_errors",
                "Targets on which the policy's condition failed to evaluate at the last "
                "evaluation (an error, not missing data).",
                ["policy"],
                registry=registry,
            ),
        )


@dataclass
class Evaluator:
    """Runs the policies on a timer; its state survives restarts through the ledger.

    Every collaborator is given at construction (nothing is wired afterwards):

    Attributes:
        feed: What the policies see at each tick, and when the next tick is due.
        knobs: The current knob values per target (the actuation runner reads them from each
            server's files).
        route: Takes the accepted intents (to the actuation runner or to approval) and
            returns the decisions it blocked, to be recorded as well.
        observe: Sees each tick's views before the policies do (the recorder).
        notify: Takes the notify decisions (the channels of :mod:`daemon.engine.runtime.notifiers`).
        tune: Takes the ``tune`` decisions: queues their what-if rounds, which run off the
            loop (:class:`~daemon.engine.evaluation.tuner.Tuner`).
    """

    config: Callable[[], GovernorConfig]
    policies: Callable[[], PolicySet]
    feed: SignalFeed
    ledger: PolicyLedger
    clock: Clock
    metrics: EvaluatorMetrics
    knobs: Callable[[], Mapping[str, Mapping[str, float]]]
    route: Callable[[Sequence[Decision]], Sequence[Decision]]
    observe: Callable[[datetime, float, Mapping[str, TargetView]], None]
    notify: Callable[[Sequence[Decision]], None]
    tune: Callable[[Sequence[Decision]], None]

    async def run(self, readiness: Readiness) -> None:
        """Load the persisted state, then evaluate forever."""
        self.ledger.restore()
        log.info("policy state restored", extra={"states": len(self.ledger.states)})
        readiness.started()
        while True:
            self.tick_once()
            await self.feed.next_evaluation(self.config().governor.evaluation_interval_s)

    def tick_once(self) -> TickResult:
        """One evaluation; returns what it concluded."""
        config = self.config()
        started = self.clock.monotonic()
        targets = config.target_names()
        policies = self.policies()
        views = self.feed.views(targets, self.knobs(), policies.signals)
        now, wall = self.clock.monotonic(), self.clock.wall()
        self.observe(wall, now, views)
        result = tick(
            policies.specs,
            self.ledger.states,
            views,
            envelopes=config.envelopes(),
            history=self.ledger.history,
            now=now,
            wall=wall,
        )
        self._note_recoveries(result.states)
        self.ledger.keep_states(result.states)
        blocked = tuple(self.route(result.accepted))
        self.ledger.record((*result.decisions, *blocked))
        self._count_errors(policies, result.states)
        for decision in (*result.decisions, *blocked):
            self._report(decision)
        # After the decisions are recorded, so that what people are told is in the audit log.
        self.notify([d for d in result.decisions if d.kind is DecisionKind.NOTIFY])
        self.tune([d for d in result.decisions if d.kind is DecisionKind.TUNE])
        self.metrics.ticks.observe(self.clock.monotonic() - started)
        return result

    def _note_recoveries(self, states: Mapping[StateKey, PolicyState]) -> None:
        for (policy, target), state in states.items():
            before = self.ledger.states.get((policy, target))
            if before is not None and before.error is not None and state.error is None:
                log.info("policy evaluates again", extra={"policy": policy, "target": target})

    def _count_errors(self, policies: PolicySet, states: Mapping[StateKey, PolicyState]) -> None:
        counts = dict.fromkeys((spec.name for spec in policies.specs), 0)
        for (policy, _target), state in states.items():
            if state.error is not None and policy in counts:
                counts[policy] += 1
        self.metrics.errors.clear()  # a removed policy's series goes with it
        for policy, count in counts.items():
            self.metrics.errors.labels(policy=policy).set(count)

    def _report(self, decision: Decision) -> None:
        self.metrics.decisions.labels(
            policy=decision.policy, kind=decision.kind.value, guard=decision.guard or ""
        ).inc()
        if decision.kind is DecisionKind.ERROR:
            log.error(
                "policy evaluation failed; the policy holds until it evaluates again",
                extra={
                    "policy": decision.policy,
                    "target": decision.target,
                    "error": decision.details.get("error"),
                    "signals": decision.evidence.signals,
                },
            )
            return
        changes = decision.intent.changes if decision.intent else None
        log.info(
            "policy decision",
            extra={
                "policy": decision.policy,
                "target": decision.target,
                "kind": decision.kind.value,
                "guard": decision.guard,
                "changes": changes,
                "signals": decision.evidence.signals,
            },
        )
