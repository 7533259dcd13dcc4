"""The governor daemon: its eternal tasks, its configuration in force, and its reloads.

:class:`Governor` owns the state that outlives one task (the configuration in force and the
reload history) and builds the list of eternal tasks for :func:`supervise`. Signal handling
stays in ``daemon.app``: a handler only calls :meth:`Governor.request_reload` or
:meth:`Governor.request_stop`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from daemon.core.actuator_kinds import ActuatorKind
from daemon.core.clock import Clock
from daemon.core.config_files import load_config
from daemon.core.control_protocol import ControlRequest
from daemon.core.errors import ConfigError, ConfigIssue, ControlError
from daemon.core.freeze_sources import NO_FREEZE_SOURCE
from daemon.core.freezes import freeze_reason, freezes_in_force
from daemon.core.http_client import HttpExchange, http_request
from daemon.core.reload_scope import restart_only_changes
from daemon.core.restart_slots import NO_RESTART_SLOTS
from daemon.core.secrets import GovernorSecrets
from daemon.core.settings import GovernorConfig
from daemon.core.version import __version__
from daemon.engine.actuation.actuation_plane import ActuationPlane
from daemon.engine.actuation.admission_loop import admission_loop
from daemon.engine.actuation.rollout_actions import EngineRolloutActions
from daemon.engine.actuation.router import Router
from daemon.engine.approvals.approval_commands import approval_handlers
from daemon.engine.approvals.approval_desk import ApprovalDesk
from daemon.engine.approvals.approval_recheck import PolicyLens
from daemon.engine.approvals.approvals_plane import ApprovalsPlane, no_group_change
from daemon.engine.approvals.group_changes import GroupDecisions, GroupProposals, thread_replies
from daemon.engine.approvals.rollout_follower import RolloutFollower
from daemon.engine.batches.batch_desk import BatchDesk
from daemon.engine.batches.lane_steerer import LaneSteerer, journal_in_flight
from daemon.engine.batches.lanes import BatchLanes
from daemon.engine.batches.online_views import OnlineFeed
from daemon.engine.evaluation.evaluator import Evaluator, EvaluatorMetrics
from daemon.engine.evaluation.policy_ledger import PolicyLedger
from daemon.engine.evaluation.policy_plane import PolicyPlane
from daemon.engine.evaluation.recorder import Recorder
from daemon.engine.evaluation.signal_feed import LiveFeed, SignalFeed
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.evaluation.tuner import OFF_LOOP, Tuner, WhatIfRunner
from daemon.engine.evaluation.whatif_desk import WhatIfDesk
from daemon.engine.fleet_plane import FleetPlane
from daemon.engine.runtime.control_server import Caller, Handler, serve_control_socket
from daemon.engine.runtime.notifiers import MqttNotifier, Notifications, SlackNotifier
from daemon.engine.runtime.own_metrics import (
    OwnMetrics,
    StateReading,
    create_own_metrics,
    serve_metrics,
)
from daemon.engine.runtime.paged_replies import PagedReplies
from daemon.engine.runtime.service_manager import ServiceManager
from daemon.engine.runtime.supervisor import EternalTask, Readiness, supervise
from daemon.engine.storage.state_db import STATE_FILE
from daemon.engine.storage.state_store import StateStore
from daemon.fleet.canary_analysis import CanaryRule
from daemon.fleet.rollout_member import RolloutMember
from daemon.fleet.rollout_thread import RolloutThread
from daemon.policy.signal_reads import signals_read

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """A validated configuration and when it was loaded."""

    config: GovernorConfig
    path: Path
    loaded_at: datetime


class Governor:
    """The daemon: builds its tasks, serves status, reloads its configuration.

    Its ports are constructor arguments: the clock, the service manager, the table of actuator
    kinds, the signal feed, where what-if rounds run, and how batch requests reach vLLM
    (``batch_exchange``: the HTTP client; a simulation's in-process server). Without a
    ``feed`` the policies see the signal plane's sources (the daemon); a backtest feeds
    recorded views on a virtual clock instead. Rounds run in a worker process (``OFF_LOOP``)
    unless the clock is virtual (``IN_PROCESS``: a worker would run in real time while the
    clock jumps).
    """

    def __init__(
        self,
        loaded: LoadedConfig,
        clock: Clock,
        manager: ServiceManager,
        secrets: GovernorSecrets | None = None,
        *,
        kinds: Sequence[ActuatorKind[Any]] = (),
        feed: SignalFeed | None = None,
        whatif: WhatIfRunner = OFF_LOOP,
        batch_exchange: HttpExchange = http_request,
    ) -> None:
        self._loaded = loaded
        self._clock = clock
        self._manager = manager
        self._metrics: OwnMetrics = create_own_metrics(clock)
        config = self._config_in_force
        registry = self._metrics.registry
        state_path = loaded.config.governor.state_dir / STATE_FILE
        # The composition root: each stage gets its collaborators here, in its constructor, in
        # the order they depend on each other; nothing is linked afterwards.
        self._signals = SignalPlane(loaded.config, clock, registry, secrets=secrets)
        # The batch lanes come first: the policies' views have their traffic taken out.
        lanes = BatchLanes(lambda: self._loaded.config.batch.prefill_piece_tokens)
        self._feed: SignalFeed = OnlineFeed(
            LiveFeed(self._signals, self._views_read) if feed is None else feed,
            lanes,
            lambda: self._loaded.config.signals.window_s,
            clock,
        )
        self._signal_pages = PagedReplies(clock)
        self._ledger = PolicyLedger(StateStore(state_path), clock)
        # A member of a fleet only with [fleet] enabled; alone, exactly as without the section.
        # Built before the actuators, whose preflight consults the fleet's freeze; it reads
        # their knobs later, hence the late-bound lookup.
        self._fleet = (
            FleetPlane(config, self._signals, lambda: self._actuation.knobs(), clock)  # noqa: PLW0108
            if loaded.config.fleet.enabled
            else None
        )
        self._actuation = ActuationPlane(
            config,
            self._signals,
            clock,
            registry,
            state_path,
            kinds=kinds,
            on_applied=self._ledger.enter_applied,
            record=self._ledger.record,
            batches=lanes.hold,
            fleet_freeze=NO_FREEZE_SOURCE if self._fleet is None else self._fleet.freezes,
            restart_slots=NO_RESTART_SLOTS if self._fleet is None else self._fleet.slots,
        )
        self._policies = PolicyPlane(
            config,
            self._signals,
            clock,
            registry,
            self._ledger,
            knobs=self._actuation.knobs,
            on_watched_reload=self._watched_reload,
        )
        lens = PolicyLens(
            specs=lambda: self._policies.policies.specs,
            states=lambda: self._ledger.states,
            views=lambda: self._feed.views(
                self._loaded.config.target_names(),
                self._actuation.knobs(),
                self._policies.policies.signals,
            ),
        )
        # Group changes (`scope: group`): one proposal per group, claimed in etcd, and the
        # decision on it handed to the group's rollout; only in a fleet.
        fleet = self._fleet
        self._group_decisions = (
            None
            if fleet is None
            else GroupDecisions(fleet.driver, fleet.group_of, self._canary_rule_of)
        )
        self._approvals = ApprovalsPlane(
            config,
            clock,
            registry,
            state_path,
            self._actuation,
            lens=lens,
            secrets=secrets,
            fleet_freeze=NO_FREEZE_SOURCE if fleet is None else fleet.freezes,
            fleet_freezer=None if fleet is None else fleet.freezer,
            group_decision=(
                no_group_change if self._group_decisions is None else self._group_decisions.decided
            ),
        )
        self._group_proposals = (
            None
            if fleet is None
            else GroupProposals(
                fleet.rollouts,
                host=fleet.host,
                group_of=fleet.group_of,
                rule_of=self._canary_rule_of,
                post=self._approvals.propose,
                poll_s=loaded.config.fleet.refresh_s,
                wait_s=float(loaded.config.fleet.lease_ttl_s),
            )
        )
        self._rollout_member = (
            None
            if fleet is None
            else RolloutMember(
                fleet.rollouts,
                host=fleet.host,
                instances=lambda: [i.name for i in self._loaded.config.vllm],
                actions=EngineRolloutActions(config, self._actuation, self._signals.store, clock),
                clock=clock,
                poll_s=loaded.config.fleet.refresh_s,
            )
        )
        # The rollout's lines in its proposal's Slack thread (from this governor's driver), and
        # the approved proposals' records following their rollouts.
        self._rollout_reporting: list[EternalTask] = []
        if fleet is not None:
            thread = RolloutThread(
                fleet.rollouts,
                host=fleet.host,
                moves=fleet.moves,
                post=thread_replies(self._approvals),
            )
            follower = RolloutFollower(
                self._approvals.store,
                fleet.rollouts,
                advance=self._approvals.advance,
                clock=clock,
                poll_s=loaded.config.fleet.refresh_s,
            )
            self._rollout_reporting = [
                EternalTask("fleet rollout thread", lambda ready: thread.run(ready.started)),
                EternalTask("group proposal follower", follower.run),
            ]
        router = Router(
            self._actuation,
            registry,
            propose=(
                self._approvals.propose
                if self._group_proposals is None
                else self._group_proposals.propose
            ),
        )
        self._notifications = self._notifiers()
        self._recorder = Recorder(lambda: self._loaded.config.recording)
        self._batches = BatchDesk(
            self._config_in_force, state_path, clock, lanes, exchange=batch_exchange
        )
        self._lane_steerer = LaneSteerer(
            config=config,
            specs=lens.specs,
            states=lens.states,
            views=lens.views,
            lanes=lanes,
            in_flight=journal_in_flight(self._actuation.journal),
            clock=clock,
            registry=registry,
        )
        self._tuner = Tuner(
            config,
            self._signals.store,
            clock,
            self._ledger,
            registry,
            knobs=self._actuation.knobs,
            specs=lambda: self._policies.policies.specs,
            route=router.submit,
            quarantine=self._quarantine_tuned,
            tell=self._notifications.send,
            reply=self._approvals.reply_in_thread,
            runner=whatif,
            series=self._feed.series,
        )
        self._evaluator = Evaluator(
            config,
            self._policies.current,
            self._feed,
            self._ledger,
            clock,
            EvaluatorMetrics.register(registry),
            knobs=self._actuation.knobs,
            route=router.submit,
            observe=self._recorder.record,
            notify=self._notifications.send,
            tune=self._tuner.submit,
        )
        # The fast loop of the admission gates: only with the gate's kind and a gate configured.
        self._admission = admission_loop(
            config=config,
            policies=self._policies,
            states=lambda: self._ledger.states,
            signals=self._signals,
            actuation=self._actuation,
            clock=clock,
            registry=registry,
        )
        self._stop = asyncio.Event()
        self._reload = asyncio.Event()
        self._started_at = clock.monotonic()
        self._state = "starting"
        self._last_reload_error = ""
        # The latest refusal, by SIGHUP or by the policy watcher; kept after a good reload.
        self._last_rejected_reload: dict[str, str] | None = None
        self._tasks = self._eternal_tasks()

    @property
    def config(self) -> GovernorConfig:
        """The configuration in force."""
        return self._loaded.config

    def _config_in_force(self) -> GovernorConfig:
        """The configuration in force now: what every stage reads (it changes on reloads)."""
        return self._loaded.config

    def _views_read(self) -> frozenset[str] | None:
        """The catalogue signals the policies' views compute; None: every one.

        The policies in force read a few signals of the catalogue; the recorder, when on,
        writes the views whole (a backtest may try a policy that reads any of them).
        """
        if self._loaded.config.recording.enabled:
            return None
        return signals_read(self._policies.policies.specs)

    def _canary_rule_of(self, policy: str) -> CanaryRule | None:
        """The canary rule of a loaded ``scope: group`` policy; None for any other."""
        spec = next((s for s in self._policies.policies.specs if s.name == policy), None)
        return None if spec is None else spec.canary

    @property
    def approval_desk(self) -> ApprovalDesk:
        """The approvals as a chat adapter sees them (``simulate`` clicks through it)."""
        return self._approvals

    @property
    def metrics(self) -> OwnMetrics:
        """The governor's own metrics."""
        return self._metrics

    def request_stop(self) -> None:
        """Begin a graceful stop (safe to call from a signal handler)."""
        if not self._stop.is_set():
            self._state = "stopping"
            self._manager.stopping()
            self._manager.status("stopping")
            self._stop.set()

    def request_reload(self) -> None:
        """Reload configuration and policies at the next opportunity."""
        self._reload.set()

    async def run(self) -> None:
        """Run every eternal task until a stop is requested or one of them crashes."""
        self._manager.status("starting")
        try:
            await supervise(self._tasks, self._stop, on_ready=self._on_ready)
        finally:
            self._ledger.store.close()
            self._recorder.close()
            self._approvals.close()
            self._actuation.close()
            self._batches.close()

    def _on_ready(self) -> None:
        self._state = "ready"
        self._metrics.ready.set(1)
        self._manager.ready(self._status_line())
        self._announce("started", {"pid": os.getpid(), "version": __version__})

    def _notifiers(self) -> Notifications:
        """The channels of notify actions.

        MQTT when a publisher is configured; Slack when the approvals plane talks to Slack (its
        channel, through its retrying client).
        """
        notifications = Notifications(self._metrics.registry)
        if self._signals.publisher is not None:
            notifications.register("mqtt", MqttNotifier(self._signals.publisher))
        if self._approvals.slack is not None:
            slack = SlackNotifier(self._approvals)
            notifications.register("slack", slack, slack.task())
        return notifications

    def _announce(self, kind: str, fields: dict[str, Any]) -> None:
        """Tell the fleet (MQTT, when configured) what just happened, and the state now."""
        publisher = self._signals.publisher
        if publisher is None:
            return
        publisher.publish_event(kind, fields)
        publisher.set_state(
            {
                "state": self._state,
                "version": __version__,
                "config_loaded_at": self._loaded.loaded_at.isoformat(),
            }
        )

    def _status_line(self) -> str:
        policies = len(self._policies.policies.specs)
        disabled = len({issue.path for issue in self._policies.policies.disabled})
        broken = f", {disabled} policy file(s) disabled" if disabled else ""
        return f"ready: {policies} policies{broken}, config {self._loaded.path}"

    def _eternal_tasks(self) -> list[EternalTask]:
        config = self._loaded.config
        tasks = [
            EternalTask("control socket server", self._serve_control),
            EternalTask("configuration reloader", self._reload_on_request),
        ]
        if config.metrics.enabled:
            tasks.append(EternalTask("metrics endpoint", self._serve_metrics))
        tasks.extend(self._feed.tasks())
        tasks.append(EternalTask("evaluator", self._evaluator.run))
        tasks.extend(self._policies.tasks())
        tasks.extend(self._tuner.tasks())
        tasks.extend(self._actuation.tasks())
        if self._admission is not None:
            tasks.append(EternalTask("admission loop", self._admission.run))
        tasks.extend(self._approvals.tasks())
        tasks.extend(self._notifications.tasks())
        tasks.extend(self._batches.tasks())
        tasks.append(EternalTask("batch lane steerer", self._lane_steerer.run))
        if self._fleet is not None:
            tasks.extend(self._fleet.tasks())
        if self._group_proposals is not None:
            tasks.append(EternalTask("group proposals", self._group_proposals.run))
        if self._group_decisions is not None:
            tasks.append(EternalTask("group decisions", self._group_decisions.run))
        if self._rollout_member is not None:
            member = self._rollout_member
            tasks.append(
                EternalTask("fleet rollout member", lambda ready: member.run(ready.started))
            )
        tasks.extend(self._rollout_reporting)
        if self._manager.watchdog_interval() is not None:
            tasks.append(EternalTask("watchdog pinger", self._ping_watchdog))
        return tasks

    async def _serve_control(self, readiness: Readiness) -> None:
        handlers: Mapping[str, Handler] = {
            "status": self._handle_status,
            "signals": self._handle_signals,
            "explain": self._handle_explain,
            "plan": self._handle_plan,
            **approval_handlers(self._approvals),
            "quarantine": self._handle_quarantine,
            "unquarantine": self._handle_unquarantine,
            "whatif": WhatIfDesk(
                self._config_in_force, self._signals.store, self._actuation.knobs, self._clock
            ).handle,
            **self._batches.handlers(),
        }
        await serve_control_socket(self._loaded.config.control.socket_path, handlers, readiness)

    async def _serve_metrics(self, readiness: Readiness) -> None:
        section = self._loaded.config.metrics
        await serve_metrics(
            self._metrics, section.listen_host, section.listen_port, readiness, self._state_now
        )

    def _state_now(self) -> StateReading:
        """Quarantines, freezes, pending proposals and the last reload, for the metrics."""
        config = self._loaded.config
        targets = tuple(config.target_names())
        now = self._clock.wall()
        return StateReading(
            targets=targets,
            quarantined=tuple(target for _, target in self._actuation.journal.quarantined()),
            frozen=tuple(t for t in targets if freeze_reason(config.governor.state_dir, t, now)),
            pending=tuple(s.record.proposal.instance for s in self._approvals.store.pending()),
            reload_ok=not self._last_reload_error,
        )

    async def _ping_watchdog(self, readiness: Readiness) -> None:
        interval = self._manager.watchdog_interval()
        assert interval is not None  # the task exists only when a watchdog is armed
        readiness.started()
        while True:
            # Pings come from the event loop itself: a blocked loop stops them, and systemd
            # then restarts a daemon that can no longer act.
            self._manager.watchdog()
            await asyncio.sleep(interval)

    async def _reload_on_request(self, readiness: Readiness) -> None:
        readiness.started()
        while True:
            await self._reload.wait()
            self._reload.clear()
            self._apply_reload()

    def _apply_reload(self) -> None:
        self._manager.reloading()
        path = self._loaded.path
        try:
            new = load_config(path)
        except ConfigError as exc:
            self._reject_reload(exc, via="SIGHUP")
            return
        # Whole or refused: a setting read once at start cannot follow the rest.
        if boot_only := restart_only_changes(self._loaded.config, new):
            self._reject_reload(
                ConfigError([_needs_restart(path, name) for name in boot_only]), via="SIGHUP"
            )
            return
        # Configuration and policies change together or not at all.
        policy_issues = self._policies.reload(new)
        if policy_issues:
            self._reject_reload(ConfigError(list(policy_issues)), via="SIGHUP")
            return
        self._loaded = LoadedConfig(new, path, self._clock.wall())
        self._signals.reload(new)  # the sources whose settings changed restart
        self._last_reload_error = ""
        logging.getLogger().setLevel(new.logging.level)
        self._metrics.config_reloads.labels(outcome="applied").inc()
        self._metrics.config_loaded_timestamp.set(self._loaded.loaded_at.timestamp())
        log.info("configuration reloaded", extra={"path": str(path)})
        self._manager.ready(self._status_line())
        self._announce("config_reloaded", {"path": str(path)})

    def _reject_reload(self, error: ConfigError, *, via: str) -> None:
        """Keep the configuration in force and say, per problem, where the new one is wrong."""
        self._last_reload_error = str(error)
        self._last_rejected_reload = {
            "at": self._clock.wall().isoformat(timespec="seconds"),
            "via": via,
            "error": str(error),
        }
        self._metrics.config_reloads.labels(outcome="rejected").inc()
        for issue in error.issues:
            log.error(
                "reload rejected; keeping the configuration in force",
                extra={"where": issue.render()},
            )
        first = error.issues[0].render()
        self._manager.ready(f"reload rejected, old configuration kept: {first}")
        self._announce("config_rejected", {"where": first})

    def _watched_reload(self, issues: tuple[ConfigIssue, ...]) -> None:
        """The policy watcher's reload (a policy file changed): told like one on SIGHUP."""
        if issues:
            self._reject_reload(ConfigError(list(issues)), via="policy file watcher")
            return
        self._last_reload_error = ""
        self._metrics.config_reloads.labels(outcome="applied").inc()
        self._manager.status(self._status_line())

    async def _handle_status(self, _request: ControlRequest, _caller: Caller) -> dict[str, Any]:
        return {
            "version": __version__,
            "pid": os.getpid(),
            "state": self._state,
            "uptime_s": round(self._clock.monotonic() - self._started_at, 3),
            "config_path": str(self._loaded.path),
            "config_loaded_at": self._loaded.loaded_at.isoformat(),
            "last_reload_error": self._last_reload_error,
            "last_rejected_reload": self._last_rejected_reload,
            "freezes": [
                freeze.as_json()
                for freeze in freezes_in_force(
                    self._loaded.config.governor.state_dir, self._clock.wall()
                )
            ],
            "tasks": [task.name for task in self._tasks],
            "sources": self._signals.source_status(),
            **self._policies.status(),
            **self._actuation.status(),
            "proposals": self._approvals.pending(),
            "gates": {} if self._admission is None else self._admission.status(),
            "batch_lanes": self._batches.lane_status(),
            "fleet": None if self._fleet is None else self._fleet.status(),
        }

    async def _handle_explain(self, request: ControlRequest, _caller: Caller) -> dict[str, Any]:
        name = request.args.get("policy")
        if not isinstance(name, str):
            message = "'policy' must be a policy name"
            raise ControlError(message)
        answer = self._policies.explain(name)
        if "error" in answer:
            raise ControlError(str(answer["error"]))
        await self._tuner.explained(name, answer, fresh=request.args.get("whatif") is True)
        return answer

    async def _handle_plan(self, request: ControlRequest, _caller: Caller) -> dict[str, Any]:
        name = request.args.get("policy")
        if not isinstance(name, str):
            message = "'policy' must be a policy name"
            raise ControlError(message)
        intents = self._policies.intents_now(name)
        if isinstance(intents, str):
            raise ControlError(intents)
        return {"policy": name, "plans": await self._actuation.dry_runs(intents)}

    def _quarantine_tuned(self, policy: str, target: str, why: str) -> None:
        """Quarantine a tune policy whose prediction missed, as a failed change's is."""
        self._actuation.journal.quarantine(policy, target, why, None)
        log.warning("tune policy quarantined", extra={"policy": policy, "target": target})
        self._announce("quarantined", {"policy": policy, "target": target, "reason": why})

    async def _handle_quarantine(self, _request: ControlRequest, _caller: Caller) -> dict[str, Any]:
        journal = self._actuation.journal
        return {"quarantined": journal.quarantine_list(), "lifted": journal.quarantine_lifts()}

    async def _handle_unquarantine(self, request: ControlRequest, caller: Caller) -> dict[str, Any]:
        policy, target, reason = (request.args.get(key) for key in ("policy", "target", "reason"))
        if not all(isinstance(value, str) and value.strip() for value in (policy, target, reason)):
            message = "'policy', 'target' and 'reason' must be non-empty strings"
            raise ControlError(message)
        assert isinstance(policy, str)
        assert isinstance(target, str)
        assert isinstance(reason, str)
        if not self._actuation.journal.lift_quarantine(policy, target, by=caller.user, why=reason):
            message = f"{policy} is not quarantined on {target} (see 'vllm-governor quarantine')"
            raise ControlError(message)
        log.warning(
            "quarantine lifted",
            extra={"policy": policy, "target": target, "by": caller.user, "reason": reason},
        )
        self._announce("quarantine_lifted", {"policy": policy, "target": target, "by": caller.user})
        return {"policy": policy, "target": target, "lifted_by": caller.user}

    async def _handle_signals(self, request: ControlRequest, _caller: Caller) -> dict[str, Any]:
        prefix = request.args.get("prefix", "")
        if not isinstance(prefix, str):
            message = "'prefix' must be a string"
            raise ControlError(message)
        page = self._signal_pages.page(
            request.args, lambda: [row.as_json() for row in self._signals.rows(prefix)]
        )
        return {
            "signals": page.rows,
            "sources": self._signals.source_status(),
            "next_offset": page.next_offset,
            "snapshot": page.snapshot,
        }


def _needs_restart(path: Path, setting: str) -> ConfigIssue:
    message = (
        "read once at start: restart the governor to change it (systemctl restart "
        "vllm-governor); nothing of this reload was applied"
    )
    return ConfigIssue(path, 0, 0, setting, message)
