"""The vLLM actuator's protocol, in virtual time: preflight, restart, wait ready, verify, revert.

It mirrors ``actuators/vllm`` step by step, with the simulated engine in place of files,
processes and HTTP probes:

1. **Preflight**, again on the path that changes the server: one change in flight per
   instance; the value the policy decided on is still the one in force; each knob inside its
   envelope (``envelope_problem``) and its dwell time and hourly budget (``pace_problem``, the
   same checks as the real preflight); a plain restart inside the instance's restart envelope
   (``restart_hourly_budget``, ``restart_min_interval_s``); the knobs agree as vLLM 0.33 demands
   (``max_num_batched_tokens >= max_num_seqs``). A refusal changes nothing.
2. **Apply**: a restart of the engine into the new settings (:meth:`VirtualRun.restart`), down
   for the profile's restart time; the knob's :class:`KnobHistory` records the change now.
3. **Wait ready**: until the engine serves again.
4. **Verify** over ``verify_window_s`` after it is ready, against the same length of time before
   the change, with the real actuator's judge (:func:`actuators.vllm.verification.judge`):
   errors, TTFT p95 and preemptions not worse than allowed.
5. **Revert** when worse: a second restart back to the settings before, and the policy is
   quarantined on that instance (the gate then blocks it, as the daemon's journal does).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from actuators.vllm.verification import judge
from daemon.app.simulation.events import (
    QUARANTINED,
    REFUSED,
    RESTART,
    REVERT,
    VERIFIED,
    EventLog,
)
from daemon.app.simulation.observe import Observer
from daemon.core.actuation import ChangeRequest
from daemon.core.envelopes import envelope_problem, pace_problem
from daemon.core.settings import VllmInstance
from daemon.policy.planner import KnobHistory
from daemon.policy.state import HOUR_S
from simulator.engine import Phase
from simulator.settings import EngineSettings, SettingsError
from simulator.virtual_time import VirtualRun

# The wall clock of a simulation: virtual second 0 is this moment (only spacing matters).
EPOCH = datetime(2025, 1, 6, tzinfo=UTC)
SETTING_KNOBS = frozenset(field.name for field in dataclasses.fields(EngineSettings))


def wall(now: float) -> datetime:
    """The wall-clock time of virtual second ``now``."""
    return EPOCH + timedelta(seconds=now)


def knob_values(settings: EngineSettings) -> dict[str, float]:
    """The knob values a governor reads from the server's config (log knobs at vLLM's defaults)."""
    return {
        "max_num_seqs": float(settings.max_num_seqs),
        "max_num_batched_tokens": float(settings.max_num_batched_tokens),
        "max_num_active_seqs": float(settings.admission_cap),
        "long_prefill_token_threshold": float(settings.long_prefill_token_threshold),
        "watermark": settings.watermark,
        "log_level": 20.0,
        "enable_log_requests": 0.0,
    }


@dataclass(slots=True)
class InFlight:
    """The one change in flight on the instance."""

    request: ChangeRequest
    before: EngineSettings
    started_at: float
    baseline: Mapping[str, float | None]
    ready_at: float | None = None
    reverting: bool = False


class VirtualActuator:
    """The actuation protocol for one simulated instance.

    Args:
        run: The virtual run whose engine is the server.
        observer: What the governor's sources see (for verification windows).
        instance: The instance's configuration: envelopes, restart envelope, verification.
        log: Where events go.
    """

    def __init__(
        self, run: VirtualRun, observer: Observer, instance: VllmInstance, log: EventLog
    ) -> None:
        self.run = run
        self.observer = observer
        self.instance = instance
        self.log = log
        self.history: dict[tuple[str, str], KnobHistory] = {}
        self.restarted_at: list[float] = []
        self.quarantined: dict[tuple[str, str], str] = {}
        self.in_flight: InFlight | None = None

    @property
    def busy(self) -> bool:
        """Whether a change is in flight (the next one is refused until it ends)."""
        return self.in_flight is not None

    def current(self) -> dict[str, float]:
        """The knob values in force (or coming, while the engine restarts)."""
        return knob_values(self.run.snapshot().settings)

    def refusal(self, request: ChangeRequest, now: float) -> str:  # noqa: PLR0911 - one per check
        """Why the request may not go ahead now ("" when it may): the preflight."""
        if self.in_flight is not None:
            return "another change is in flight on this instance"
        if self.run.engine.phase is not Phase.SERVING:
            return "the server is not serving"
        current = self.current()
        for knob, new in request.changes.items():
            old = current.get(knob)
            if old is None:
                return f"the current {knob} is not known"
            if request.current.get(knob) != old:
                return f"stale decision: {knob} is {old:g} now, not {request.current.get(knob)}"
            problem = envelope_problem(knob, self.instance.knobs.get(knob), old, new)
            if problem:
                return problem
            envelope = self.instance.knobs[knob]
            changed = self.history.get((request.target, knob), KnobHistory()).changes
            problem = pace_problem(knob, envelope, [wall(at) for at in changed], wall(now))
            if problem:
                return problem
        if request.operation == "restart":
            recent = [at for at in self.restarted_at if now - at < HOUR_S]
            if len(recent) >= self.instance.restart_hourly_budget:
                return f"already {len(recent)} restarts in the last hour"
            if recent and now - recent[-1] < self.instance.restart_min_interval_s:
                return f"restarted {now - recent[-1]:.0f} s ago"
        try:
            self._settings_after(request)
        except SettingsError as exc:
            return f"vLLM would refuse these settings: {exc}"
        return ""

    def submit(self, request: ChangeRequest, now: float) -> bool:
        """Preflight, then apply (a restart): True when it went ahead."""
        why = self.refusal(request, now)
        if why:
            self.log.add(now, REFUSED, request.policy, detail=why)
            return False
        before = self.run.snapshot().settings
        after = self._settings_after(request)
        start = max(0.0, now - self.instance.verify_window_s)
        baseline = self.observer.measures(start, now)
        self.in_flight = InFlight(request, before, now, baseline)
        self._restart(now, request.policy, before=before, after=after, kind=RESTART)
        for knob in request.changes:
            key = (request.target, knob)
            self.history[key] = self.history.get(key, KnobHistory()).changed(now)
        return True

    def step(self, now: float) -> None:
        """Move the change in flight along: ready, then verified or reverted."""
        change = self.in_flight
        if change is None or self.run.engine.phase is not Phase.SERVING:
            return
        if change.ready_at is None:
            change.ready_at = now
            if change.reverting:
                self.in_flight = None
            return
        if now - change.ready_at < self.instance.verify_window_s:
            return
        after = self.observer.measures(change.ready_at, now)
        verdict = judge(change.baseline, after, self.instance)
        policy = change.request.policy
        if verdict.ok:
            self.log.add(now, VERIFIED, policy, detail=verdict.detail)
            self.in_flight = None
            return
        current = self.run.snapshot().settings
        self._restart(
            now, policy, before=current, after=change.before, kind=REVERT, detail=verdict.detail
        )
        for knob in change.request.changes:
            key = (change.request.target, knob)
            self.history[key] = self.history.get(key, KnobHistory()).changed(now)
        self.quarantined[(policy, change.request.target)] = verdict.detail
        self.log.add(now, QUARANTINED, policy, detail=verdict.detail)
        change.reverting = True
        change.ready_at = None

    def _settings_after(self, request: ChangeRequest) -> EngineSettings:
        settings = self.run.snapshot().settings
        values: dict[str, Any] = {
            knob: (int(value) if isinstance(getattr(settings, knob), int) else value)
            for knob, value in request.changes.items()
            if knob in SETTING_KNOBS and knob != "max_num_active_seqs"
        }
        return dataclasses.replace(settings, **values)

    def _restart(
        self,
        now: float,
        policy: str,
        *,
        before: EngineSettings,
        after: EngineSettings,
        kind: str,
        detail: str = "",
    ) -> None:
        old, new = knob_values(before), knob_values(after)
        changes = {k: (old[k], new[k]) for k in old if old[k] != new[k]}
        self.restarted_at.append(now)
        self.run.restart(after)
        self.log.add(now, kind, policy, changes, detail)
