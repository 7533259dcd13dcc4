"""The fast loop: while an admission policy fires on an instance, move the cap at its gate.

The evaluator decides *whether* a policy fires (its ``when``, ``for``, windows, shadow mode);
this task reads those states and does the rest, every ``interval_s`` of the policy rather
than every evaluation tick:

- **Step.** For each instance with a gate and a firing admission policy, the controller
  (``slo-band``, ``gradient2``, ...) is stepped with :func:`admission_signals` of the instance's
  current view (fresh values only; a missing one makes the controller hold), and a new cap goes
  to the gate's actuator: the ``haproxy_gate`` kind of the table, through the one actuator
  protocol's ``apply`` (knob ``gate_cap``), whose preflight makes the checks every change
  makes (envelope, freeze, one change in flight, dry run) and which reverts a cap the gate did
  not take. Two admission policies firing on one instance: the first by name steers; the
  other waits.
- **Bound.** ``max_cap`` is the instance's ``max-num-seqs`` as its files say now. Unknown: hold.
  A cap above it (an approved restart lowered ``max-num-seqs``) is brought down to it at once,
  whatever the policies say.
- **Restore.** When the policy stops firing (or is removed, or leaves its window) the gate goes
  back to ``max-num-seqs``: open as wide as vLLM itself.
- **Never on stale data.** Without a fresh ``gate_cap`` (HAProxy down or slow) nothing is
  sent; the loop says so in ``status``.

Each controller's signals are read over its own window (``window_s``: slo-band's is its
``settle_s``), the one its pacing is designed around: slo-band waits out one window after a
cut before it grows, and lets one window's cuts go no deeper than ``max_cut`` together. Read
over a shorter window, its quantiles forget the requests admitted before a cut long before it
stops waiting for them, and it cut a 70B at 0.6 of capacity again and again (the proof).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from daemon.core.actuation import ChangeRequest
from daemon.core.actuator_kinds import Actuator
from daemon.core.clock import Clock
from daemon.core.gate_actuation import (
    CAP_APPLIED,
    CAP_UNCHANGED,
    GATE_CAP_KNOB,
    CapResult,
    cap_request,
)
from daemon.core.settings import GovernorConfig, VllmInstance
from daemon.engine.actuation.actuation_plane import ActuationPlane
from daemon.engine.actuation.haproxy_gate import HaproxyGate
from daemon.engine.evaluation.policy_plane import PolicyPlane
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.runtime.supervisor import Readiness
from daemon.policy.admission.controllers import build_controller
from daemon.policy.admission.from_view import SIGNALS_READ, admission_signals
from daemon.policy.admission.signals import AdmissionController
from daemon.policy.evaluate import TargetView
from daemon.policy.spec import PolicySpec
from daemon.policy.state import Phase, PolicyState
from daemon.policy.views import target_views
from daemon.sources.view import SignalRow

log = logging.getLogger(__name__)

TICK_S = 0.5  # how often the loop looks; each policy steps at its own interval_s
CAP_ONLY = frozenset({"gate_cap"})  # what an unsteered gate's look reads
CAP_WINDOW_S = 10.0  # an unsteered gate's look reads its cap alone: any window holds it
RESTORE = "restore"  # the "policy" of a change that opens the gate back to max-num-seqs
CLAMP = "clamp"  # the "policy" of a change that brings a cap down to max-num-seqs

StateKey = tuple[str, str]  # (policy, target)


@dataclass
class _Steering:
    """One admission policy steering one gate: its controller and what it remembers."""

    policy: str
    bounds: tuple[str, int, int, tuple[tuple[str, float], ...]]
    controller: AdmissionController[Any]
    state: Any
    next_at: float = 0.0


@dataclass
class _GateStatus:
    """What ``status`` shows of one gate."""

    cap: float | None = None
    max_num_seqs: float | None = None
    policy: str | None = None
    controller: str | None = None
    hold: str = ""
    last_step: str = ""
    last_change: dict[str, Any] = field(default_factory=dict)


class AdmissionLoop:
    """Steps the admission controllers and keeps every gate within ``max-num-seqs``.

    Args:
        config: The configuration in force.
        specs: The policies in force.
        states: The evaluator's policy states, by (policy, target).
        rows: The signal rows now, over a window in seconds (fresh values only reach views).
        knobs: Current knob values per instance (``max_num_seqs``), from the actuation plane.
        gates: Where each instance's gate is, for ``status`` (instances without one are absent).
        actuator: The gate's actuator, from the table's kind that moves ``gate_cap``.
        clock: The injected clock.
        registry: Where the loop's metrics go.
    """

    def __init__(
        self,
        *,
        config: Callable[[], GovernorConfig],
        specs: Callable[[], Sequence[PolicySpec]],
        states: Callable[[], Mapping[StateKey, PolicyState]],
        rows: Callable[[float, frozenset[str]], Sequence[SignalRow]],
        knobs: Callable[[], Mapping[str, Mapping[str, float]]],
        gates: Mapping[str, str],
        actuator: Actuator[VllmInstance],
        clock: Clock,
        registry: CollectorRegistry,
    ) -> None:
        self._config = config
        self._specs = specs
        self._states = states
        self._rows = rows
        self._knobs = knobs
        self._gates = dict(gates)
        self._actuator = actuator
        self._clock = clock
        self._steering: dict[str, _Steering] = {}
        self._touched: set[str] = set()
        self._status: dict[str, _GateStatus] = {target: _GateStatus() for target in self._gates}
        self._refusals: dict[str, str] = {}
        self._cap = Gauge(
            "vllm_governor_gate_cap",
            "The admission cap in force at each instance's gate, as last read or set.",
            ["target"],
            registry=registry,
        )
        self._changes = Counter(
            "vllm_governor_gate_cap_changes",
            "Attempts to move an admission cap, by target and outcome.",
            ["target", "outcome"],
            registry=registry,
        )

    async def run(self, readiness: Readiness) -> None:
        """Look every :data:`TICK_S`, forever."""
        readiness.started()
        while True:
            await self.tick_once()
            await asyncio.sleep(TICK_S)

    async def tick_once(self) -> None:
        """One look at every gate: step, clamp or restore where due."""
        instances = {i.name: i for i in self._config().vllm if i.name in self._gates}
        if not instances:
            return
        specs = {name: self._steering_spec(name) for name in instances}
        # Quantiles are the costly part of a view: only a steered gate needs them, over its
        # controller's window; the others need their cap alone (to clamp it to max-num-seqs,
        # or open it back). One read per window in use, usually one.
        windows = {name: _window_s(spec) for name, spec in specs.items()}
        knobs = self._knobs()
        views: dict[float | None, dict[str, TargetView]] = {}
        for window in set(windows.values()):
            rows = self._rows(window or CAP_WINDOW_S, SIGNALS_READ if window else CAP_ONLY)
            views[window] = target_views(rows, list(instances), knobs)
        for name, instance in instances.items():
            view = views[windows[name]][name]
            max_seqs = knobs.get(name, {}).get("max_num_seqs")
            await self._look(instance, specs[name], view, max_seqs)

    def status(self) -> dict[str, Any]:
        """Each gate: its cap, ``max-num-seqs``, who steers it, why it holds, the last change."""
        return {
            target: {"gate": self._gates[target], **vars(status)}
            for target, status in sorted(self._status.items())
        }

    async def _look(
        self,
        instance: VllmInstance,
        spec: PolicySpec | None,
        view: TargetView,
        max_seqs: float | None,
    ) -> None:
        target = instance.name
        status = self._status[target]
        cap = view.signals.get("gate_cap")
        status.cap, status.max_num_seqs = cap, max_seqs
        status.policy = spec.name if spec is not None else None
        status.controller = _controller_name(spec)
        if not isinstance(cap, float | int):
            status.hold = "no fresh gate_cap (is HAProxy up?): nothing is sent"
            return
        self._cap.labels(target=target).set(cap)
        if max_seqs is None:
            status.hold = "max_num_seqs unknown (no config_path, or unreadable): hold"
            return
        max_cap = int(max_seqs)
        status.hold = ""
        if cap > max_cap:
            reason = f"cap {int(cap)} above max-num-seqs {max_cap}"
            await self._set(instance, cap_request(target, CLAMP, max_cap, max_cap, reason))
            return
        if spec is None:
            self._steering.pop(target, None)
            if cap != max_cap and (target in self._touched or self._managed(target)):
                reason = "no admission policy fires: back to max-num-seqs"
                await self._set(instance, cap_request(target, RESTORE, max_cap, max_cap, reason))
            return
        await self._step(instance, spec, view, max_cap)

    async def _step(
        self, instance: VllmInstance, spec: PolicySpec, view: TargetView, max_cap: int
    ) -> None:
        target = instance.name
        assert spec.action is not None
        assert spec.action.admission is not None
        admission = spec.action.admission
        now = self._clock.monotonic()
        bounds = (
            admission.controller,
            min(admission.min_cap, max_cap),
            max_cap,
            tuple(sorted(admission.params.items())),
        )
        steering = self._steering.get(target)
        if steering is None or steering.policy != spec.name:
            steering = None
        elif steering.bounds != bounds:
            # max-num-seqs moved (a restart): same memory, new bounds.
            steering.controller = self._controller(bounds)
            steering.bounds = bounds
        if steering is None:
            controller = self._controller(bounds)
            steering = _Steering(spec.name, bounds, controller, controller.initial_state())
            self._steering[target] = steering
        if now < steering.next_at:
            return
        steering.next_at = now + admission.interval_s
        step = steering.controller.step(steering.state, admission_signals(view), now)
        steering.state = step.state
        self._status[target].last_step = step.reason
        if step.cap is not None:
            change = cap_request(target, spec.name, step.cap, max_cap, step.reason)
            await self._set(instance, change)

    @staticmethod
    def _controller(
        bounds: tuple[str, int, int, tuple[tuple[str, float], ...]],
    ) -> AdmissionController[Any]:
        kind, min_cap, max_cap, params = bounds
        return build_controller(kind, min_cap=min_cap, max_cap=max_cap, **dict(params))

    def _steering_spec(self, target: str) -> PolicySpec | None:
        """The admission policy that steers ``target`` now: the first by name that acts."""
        states = self._states()
        wall = self._clock.wall()
        for spec in sorted(self._admission_specs(target), key=lambda s: s.name):
            state = states.get((spec.name, target))
            in_window = not spec.windows or any(w.contains(wall) for w in spec.windows)
            if state is not None and state.phase is Phase.FIRING and in_window:
                return spec
        return None

    def _managed(self, target: str) -> bool:
        """Whether an admission policy watches ``target`` (its gate is then kept open)."""
        return any(True for _ in self._admission_specs(target))

    def _admission_specs(self, target: str) -> list[PolicySpec]:
        return [
            spec
            for spec in self._specs()
            if spec.action is not None
            and spec.action.admission is not None
            and not spec.shadow
            and spec.applies_to(target)
        ]

    async def _set(self, instance: VllmInstance, change: ChangeRequest) -> None:
        result = CapResult.of(await self._actuator.apply(instance, change))
        self._changes.labels(target=change.target, outcome=result.state).inc()
        self._touched.add(change.target)
        if result.after is not None:
            self._cap.labels(target=change.target).set(result.after)
        if result.state == CAP_UNCHANGED:
            return
        self._report(change, result)

    def _report(self, change: ChangeRequest, result: CapResult) -> None:
        fields = {"target": change.target, "policy": change.policy, "outcome": result.outcome}
        status = self._status[change.target]
        if result.state == CAP_APPLIED:
            self._refusals.pop(change.target, None)
            log.info("admission cap moved", extra={**fields, "reason": change.reason})
        elif result.outcome != self._refusals.get(change.target):
            # A refusal repeats every tick (a freeze, a dry run): said once per reason.
            self._refusals[change.target] = result.outcome
            log.warning(f"admission cap {result.state}", extra=fields)
        status.last_change = {
            "at": self._clock.wall().isoformat(),
            "policy": change.policy,
            "state": result.state,
            "before": result.before,
            "after": result.after,
            "reason": change.reason,
            "outcome": result.outcome,
        }


def _window_s(spec: PolicySpec | None) -> float | None:
    """The window the policy's controller reads its signals over; None without a policy."""
    if spec is None or spec.action is None or spec.action.admission is None:
        return None
    admission = spec.action.admission
    # Bounds do not change a window; the policy's own min_cap keeps them valid.
    probe = build_controller(
        admission.controller,
        min_cap=admission.min_cap,
        max_cap=admission.min_cap,
        **admission.params,
    )
    return probe.window_s


def _controller_name(spec: PolicySpec | None) -> str | None:
    if spec is None or spec.action is None or spec.action.admission is None:
        return None
    return spec.action.admission.controller


def admission_loop(
    *,
    config: Callable[[], GovernorConfig],
    policies: PolicyPlane,
    states: Callable[[], Mapping[StateKey, PolicyState]],
    signals: SignalPlane,
    actuation: ActuationPlane,
    clock: Clock,
    registry: CollectorRegistry,
) -> AdmissionLoop | None:
    """The loop, when the table has a kind that moves ``gate_cap`` and it has a target.

    The gate's actuator (its journal, freezes and the fleet's freeze included) is the one
    the actuation plane built from the table, with the same services as every other kind.
    """
    driven = actuation.driven(GATE_CAP_KNOB)
    if driven is None:
        return None
    kind, actuator = driven
    gates = {instance.name: HaproxyGate(instance.gate).where for instance in kind.targets(config())}
    if not gates:
        return None
    return AdmissionLoop(
        config=config,
        specs=lambda: policies.policies.specs,
        states=states,
        rows=lambda window_s, only: signals.rows(window_s=window_s, only=only),
        knobs=actuation.knobs,
        gates=gates,
        actuator=actuator,
        clock=clock,
        registry=registry,
    )
