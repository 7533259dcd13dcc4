"""The limiter baselines' loop on the gate's cap, in virtual time: stepped every ``interval_s``.

Only the baselines (gradient2, aimd, vegas: always on, no policy) use it; the governor's runs
move the cap through the daemon's own admission loop and the gate's actuator. Each step reads
the controller's signals from the view
(:func:`daemon.policy.admission.from_view.admission_signals`, shared with the daemon) and sets
the cap it returns, live, at the simulated gate. The cap stays within
``[min_cap, max-num-seqs]``: the controller is rebuilt with the new bound when a restart
changes ``max-num-seqs`` (its state carries over).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from daemon.app.simulation.events import CAP, EventLog
from daemon.policy.admission.controllers import build_controller
from daemon.policy.admission.from_view import admission_signals
from daemon.policy.admission.signals import AdmissionController
from daemon.policy.evaluate import TargetView
from simulator.virtual_time import VirtualRun


class CapLoop:
    """One admission controller on one gate.

    Args:
        run: The run whose gate it moves.
        log: Where cap changes go.
        owner: The policy (or baseline) it acts for.
        kind: The controller's name (``slo-band``, ``gradient2``, ``aimd``, ``vegas``).
        min_cap: Its lowest cap.
        interval_s: Seconds between two steps.
        params: Its own parameters.
    """

    def __init__(
        self,
        run: VirtualRun,
        log: EventLog,
        owner: str,
        kind: str,
        *,
        min_cap: int,
        interval_s: float,
        params: Mapping[str, float] | None = None,
    ) -> None:
        self.run = run
        self.log = log
        self.owner = owner
        self.kind = kind
        self.min_cap = min_cap
        self.interval_s = interval_s
        self.params = dict(params or {})
        self._controller: AdmissionController[Any] | None = None
        self._state: Any = None
        self._next_at: float | None = None

    def step(self, now: float, view: TargetView) -> None:
        """Step the controller if its interval has passed; set the cap it returns."""
        if self._next_at is not None and now < self._next_at:
            return
        self._next_at = now + self.interval_s
        controller = self._controller_for(self.run.snapshot().settings.max_num_seqs)
        result = controller.step(self._state, admission_signals(view), now)
        self._state = result.state
        if result.cap is not None:
            set_cap(self.run, self.log, now, self.owner, result.cap, detail=result.reason)

    def stop(self, now: float) -> None:
        """The policy stopped firing: forget the controller and open the gate to max-num-seqs."""
        self._controller = None
        self._state = None
        self._next_at = None
        set_cap(self.run, self.log, now, self.owner, self.run.snapshot().settings.max_num_seqs)

    @property
    def active(self) -> bool:
        """Whether the loop has stepped since it (re)started."""
        return self._controller is not None

    def _controller_for(self, max_num_seqs: int) -> AdmissionController[Any]:
        controller = self._controller
        if controller is None or controller.max_cap != max_num_seqs:
            fresh = build_controller(
                self.kind,
                min_cap=min(self.min_cap, max_num_seqs),
                max_cap=max_num_seqs,
                **self.params,
            )
            if controller is None:
                self._state = fresh.initial_state()
            self._controller = fresh
            controller = fresh
        return controller


def set_cap(
    run: VirtualRun, log: EventLog, now: float, owner: str, cap: int, *, detail: str = ""
) -> None:
    """Set the gate's cap (logged only when it changes)."""
    gate = run.gate
    if gate is None or gate.cap == cap:
        return
    old = gate.cap
    run.set_gate_cap(cap)
    log.add(now, CAP, owner, {"gate_cap": (float(old), float(cap))}, detail)
