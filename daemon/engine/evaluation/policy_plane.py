"""The policy plane: the policies in force, their watcher, their status.

Policies reload with the configuration (SIGHUP) and by themselves when a file under the policy
directories changes; either way the swap is whole or not at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from daemon.core.clock import Clock
from daemon.core.errors import ConfigError, ConfigIssue
from daemon.core.settings import GovernorConfig
from daemon.engine.evaluation.policy_ledger import PolicyLedger
from daemon.engine.evaluation.policy_set import (
    PolicySet,
    fingerprint,
    load_policy_set,
    reload_policy_set,
)
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.runtime.supervisor import EternalTask, Readiness
from daemon.policy.decisions import Decision, DecisionKind
from daemon.policy.evaluate import TargetView, evaluate
from daemon.policy.explanations import explain_policy, fires_at
from daemon.policy.planner import plan
from daemon.policy.spec import PolicySpec
from daemon.policy.state import Phase, PolicyState
from daemon.policy.views import target_views
from daemon.sources.registry import signal_registry

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 2.0


class PolicyPlane:
    """Owns the policy set in force and its watcher; answers ``status``, ``explain``, ``plan``."""

    def __init__(
        self,
        config: Callable[[], GovernorConfig],
        signals: SignalPlane,
        clock: Clock,
        registry: CollectorRegistry,
        ledger: PolicyLedger,
        *,
        knobs: Callable[[], Mapping[str, Mapping[str, float]]],
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
        self._ledger = ledger
        self._knobs = knobs
        current = config()
        self.policies = load_policy_set(
            current.governor.policy_dirs,
            current.target_names(),
            current.live_target_names(),
            signal_registry(current),
        )
        Gauge("vllm_governor_policies", "Policies in force.", registry=registry).set_function(
            lambda: len(self.policies.specs)
        )
        Gauge(
            "vllm_governor_policy_files_disabled",
            "Policy files left out because they are invalid.",
            registry=registry,
        ).set_function(lambda: len({issue.path for issue in self.policies.disabled}))

    def current(self) -> PolicySet:
        """The policy set in force now (it changes on reloads)."""
        return self.policies

    def tasks(self) -> list[EternalTask]:
        """The watcher of policy files."""
        return [EternalTask("policy file watcher", self._watch)]

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
            self._ledger.store.forget_policies(spec.name for spec in self.policies.specs)
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
            for (name, target), state in self._ledger.states.items():
                if name == spec.name:
                    targets[target] = _state_json(state, spec, offset)
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
            "recent_decisions": self._ledger.store.recent_decisions(20),
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
        result = plan(intents, config.envelopes(), self._ledger.history, now)
        return [*result.accepted, *result.blocked]

    def _views(self, config: GovernorConfig) -> dict[str, TargetView]:
        rows = self._signals.rows()
        knobs = self._knobs()
        return target_views(rows, config.target_names(), knobs, self.policies.signals)

    def explain(self, name: str) -> dict[str, Any]:
        """For the current signals: each target's view of one policy and what would happen."""
        spec = next((s for s in self.policies.specs if s.name == name), None)
        if spec is None:
            known = ", ".join(s.name for s in self.policies.specs) or "none"
            return {"error": f"no policy named {name!r} (in force: {known})"}
        views = self._views(self._config())
        now, wall = self._clock.monotonic(), self._clock.wall()
        return explain_policy(spec, self._ledger.states, views, now, wall)


def _state_json(state: PolicyState, spec: PolicySpec, offset: float) -> dict[str, Any]:
    cooling = None
    if state.last_action_at is not None:
        cooling = state.last_action_at + spec.cooldown_s + offset
    fires = fires_at(spec, state)
    return {
        # "error" when the condition failed to evaluate: the phase holds meanwhile.
        "state": "error" if state.error is not None else state.phase.value,
        "phase": state.phase.value,
        "since": None if state.since is None else state.since + offset,
        "last_action_at": None if state.last_action_at is None else state.last_action_at + offset,
        "cooling_down_until": cooling,
        "blocked_by": state.blocked_by,
        "error": state.error,
        # A pending policy: when it fires (and acts, unless it only records) if it holds on.
        "fires_at": None if fires is None else fires + offset,
        "acts": spec.action is not None and not spec.shadow,
    }
