"""The policy plane: the policies in force, their evaluator, their watcher, their status.

Policies reload with the configuration (SIGHUP) and by themselves when a file under the policy
directories changes; either way the swap is whole or not at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from daemon.core.actuation import ActuationResult
from daemon.core.clock import Clock
from daemon.core.errors import ConfigError, ConfigIssue
from daemon.core.settings import GovernorConfig
from daemon.engine.actuation_plane import ActuationPlane
from daemon.engine.evaluator import Evaluator, EvaluatorMetrics
from daemon.engine.policy_set import fingerprint, load_policy_set, reload_policy_set
from daemon.engine.recorder import Recorder
from daemon.engine.signal_plane import SignalPlane
from daemon.engine.state_store import StateStore
from daemon.engine.supervisor import EternalTask, Readiness
from daemon.policy.decisions import Decision, DecisionKind
from daemon.policy.evaluate import TargetView, evaluate
from daemon.policy.explanations import explain_policy
from daemon.policy.planner import KnobHistory, KnobKey, plan
from daemon.policy.state import Phase, PolicyState
from daemon.policy.views import target_views
from daemon.sources.registry import signal_registry

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 2.0
STATE_FILE = "state.sqlite3"


class PolicyPlane:
    """Owns the policy set and the evaluator."""

    def __init__(
        self,
        config: Callable[[], GovernorConfig],
        signals: SignalPlane,
        clock: Clock,
        registry: CollectorRegistry,
        actuation: ActuationPlane | None = None,
        *,
        on_watched_reload: Callable[[tuple[ConfigIssue, ...]], None],
    ) -> None:
        """Load the policies under ``config``'s directories.

        ``on_watched_reload`` hears the outcome of each reload the file watcher makes (no
        issues: applied), so that it is counted and shown like a reload on SIGHUP.

        Raises:
            ConfigError: a policy directory is missing or cannot be read.
        """
        self._config = config
        self._on_watched_reload = on_watched_reload
        self._signals = signals
        self._clock = clock
        current = config()
        self.policies = load_policy_set(
            current.governor.policy_dirs,
            current.target_names(),
            current.live_target_names(),
            signal_registry(current),
        )
        self.store = StateStore(current.governor.state_dir / STATE_FILE)
        self.evaluator = Evaluator(
            config,
            lambda: self.policies,
            signals,
            self.store,
            clock,
            EvaluatorMetrics.register(registry),
        )
        self.recorder = Recorder(lambda: config().recording)
        self.evaluator.observe = self.recorder.record
        if actuation is not None:
            self.evaluator.knobs = actuation.knobs
            self.evaluator.gate = actuation.submit
            actuation.on_applied = self.record_applied
            actuation.record = self.record_decisions
        Gauge("vllm_governor_policies", "Policies in force.", registry=registry).set_function(
            lambda: len(self.policies.specs)
        )
        Gauge(
            "vllm_governor_policy_files_disabled",
            "Policy files left out because they are invalid.",
            registry=registry,
        ).set_function(lambda: len({issue.path for issue in self.policies.disabled}))

    def tasks(self) -> list[EternalTask]:
        """The evaluator and the watcher of policy files."""
        return [
            EternalTask("evaluator", self.evaluator.run),
            EternalTask("policy file watcher", self._watch),
        ]

    def close(self) -> None:
        """Close the state store and the recording."""
        self.store.close()
        self.recorder.close()

    def record_applied(self, result: ActuationResult) -> None:
        """Enter a change that restarted a server in its knobs' histories (dwell, budgets)."""
        now, offset = self._clock.monotonic(), self._offset()
        entered = changed_histories(self.evaluator.history, result.target, result.changes, now)
        for key, history in entered.items():
            self.evaluator.history[key] = history
            self.store.save_history(key, history, offset)

    def record_decisions(self, decisions: Sequence[Decision]) -> None:
        """Add decisions made outside a tick (an alert after a revert) to the log."""
        self.store.record(decisions, self._offset())

    def _offset(self) -> float:
        return self._clock.wall().timestamp() - self._clock.monotonic()

    def reload(self, config: GovernorConfig) -> tuple[ConfigIssue, ...]:
        """Swap in the policies under ``config``'s directories, or keep the old set and say why."""
        try:
            signals = signal_registry(config)
        except ConfigError as exc:
            return exc.issues
        self.policies, issues = reload_policy_set(
            self.policies,
            config.governor.policy_dirs,
            config.target_names(),
            config.live_target_names(),
            signals,
        )
        if not issues:
            self.store.forget_policies(spec.name for spec in self.policies.specs)
            log.info("policies loaded", extra={"policies": [s.name for s in self.policies.specs]})
        return issues

    async def _watch(self, readiness: Readiness) -> None:
        readiness.started()
        while True:
            await asyncio.sleep(WATCH_INTERVAL_S)
            config = self._config()
            if fingerprint(config.governor.policy_dirs) == self.policies.fingerprint:
                continue
            self._on_watched_reload(self.reload(config))

    def status(self) -> dict[str, Any]:
        """Each policy's state per target, the disabled files, the latest decisions."""
        offset = self._clock.wall().timestamp() - self._clock.monotonic()
        policies = []
        for spec in self.policies.specs:
            targets = {}
            for (name, target), state in self.evaluator.states.items():
                if name == spec.name:
                    targets[target] = _state_json(state, spec.cooldown_s, offset)
            policies.append(
                {
                    "name": spec.name,
                    "source": spec.source,
                    "mode": "shadow" if spec.shadow else "active",
                    "targets": targets,
                }
            )
        return {
            "policies": policies,
            "disabled": [issue.render() for issue in self.policies.disabled],
            "recent_decisions": self.store.recent_decisions(20),
        }

    def intents_now(self, name: str) -> list[Decision] | str:
        """What ``name`` would change on each target if it fired now, inside the envelopes.

        For ``apply --dry-run``: the policy is taken as firing and free to act (no cooldown,
        no pending ``for``), so only its condition, its schedule, the current knob values and
        the envelopes decide. Returns a sentence instead when there is no such policy.
        """
        spec = next((s for s in self.policies.specs if s.name == name), None)
        if spec is None:
            known = ", ".join(s.name for s in self.policies.specs) or "none"
            return f"no policy named {name!r} (in force: {known})"
        config = self._config()
        views = self._views(config)
        now, wall = self._clock.monotonic(), self._clock.wall()
        firing = PolicyState(Phase.FIRING, now - spec.for_s)
        intents: list[Decision] = []
        for target, view in views.items():
            if spec.applies_to(target):
                _, decisions = evaluate(spec, firing, view, now, wall)
                intents.extend(d for d in decisions if d.kind is DecisionKind.INTENT)
        result = plan(intents, config.envelopes(), self.evaluator.history, now)
        return [*result.accepted, *result.blocked]

    def _views(self, config: GovernorConfig) -> dict[str, TargetView]:
        rows = self._signals.rows()
        knobs = self.evaluator.knobs()
        return target_views(rows, config.target_names(), knobs, self.policies.signals)

    def explain(self, name: str) -> dict[str, Any]:
        """For the current signals: each target's view of one policy and what would happen."""
        spec = next((s for s in self.policies.specs if s.name == name), None)
        if spec is None:
            known = ", ".join(s.name for s in self.policies.specs) or "none"
            return {"error": f"no policy named {name!r} (in force: {known})"}
        views = self._views(self._config())
        now, wall = self._clock.monotonic(), self._clock.wall()
        return explain_policy(spec, self.evaluator.states, views, now, wall)


def changed_histories(
    history: Mapping[KnobKey, KnobHistory], target: str, knobs: Iterable[str], now: float
) -> dict[KnobKey, KnobHistory]:
    """The histories of ``target``'s ``knobs`` after a change applied at ``now``.

    What the daemon enters once a change has restarted the server; backtests enter would-have
    changes the same way.
    """
    return {
        (target, knob): history.get((target, knob), KnobHistory()).changed(now) for knob in knobs
    }


def _state_json(state: PolicyState, cooldown_s: float, offset: float) -> dict[str, Any]:
    cooling = None
    if state.last_action_at is not None:
        cooling = state.last_action_at + cooldown_s + offset
    return {
        # "error" when the condition failed to evaluate: the phase holds meanwhile.
        "state": "error" if state.error is not None else state.phase.value,
        "phase": state.phase.value,
        "since": None if state.since is None else state.since + offset,
        "last_action_at": None if state.last_action_at is None else state.last_action_at + offset,
        "cooling_down_until": cooling,
        "blocked_by": state.blocked_by,
        "error": state.error,
    }
