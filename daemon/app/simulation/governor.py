"""The governor in virtual time: the real policy engine, planner, gate routing and protocol.

Every second of virtual time the sources scrape (:class:`Observer`), the change in flight moves on
(:class:`VirtualActuator`) and due approvals are answered (:class:`SimulatedApprovals`). Every
``evaluation_interval_s`` the real :func:`daemon.policy.tick.tick` runs on the target's view with
the config's envelopes and the knobs' history, and the real
:func:`daemon.engine.actuation.routing.route` sends the accepted intents to the actuator (risk
``auto``) or to the approvals (risk ``approval``); quarantined policies are blocked there. While a
policy with an ``admission`` action fires on the target, its fast loop (:class:`CapLoop`) moves the
gate's cap every ``interval_s``; when it stops firing the gate opens back to max-num-seqs.
"""

from __future__ import annotations

from collections.abc import Sequence

from daemon.app.simulation.actuation import VirtualActuator, wall
from daemon.app.simulation.admission import CapLoop, set_cap
from daemon.app.simulation.approvals import Answer, SimulatedApprovals
from daemon.app.simulation.events import EventLog
from daemon.app.simulation.observe import Observer
from daemon.core.settings import Envelope, VllmInstance
from daemon.engine.actuation.routing import route
from daemon.engine.approvals.approval_recheck import PolicyLens
from daemon.policy.evaluate import TargetView
from daemon.policy.spec import PolicySpec
from daemon.policy.state import Phase, PolicyState
from daemon.policy.tick import StateKey, tick
from simulator.virtual_time import VirtualRun


class Governor:
    """The governor's engine driving one simulated instance.

    Args:
        run: The virtual run (with a gate for the two-speed governor).
        specs: The policies in force.
        instance: The instance's configuration (envelopes, restart envelope, verification).
        interval_s: Seconds between two ticks of the policies.
        approval_delay_s: Seconds before a proposal is answered.
        approval_answer: What every answer is.
    """

    def __init__(
        self,
        run: VirtualRun,
        specs: Sequence[PolicySpec],
        instance: VllmInstance,
        *,
        interval_s: float,
        approval_delay_s: float,
        approval_answer: Answer,
    ) -> None:
        self.run = run
        self.specs = tuple(specs)
        self.instance = instance
        self.target = instance.name
        self.interval_s = interval_s
        self.log = EventLog()
        self.observer = Observer(run, self.target)
        self.actuator = VirtualActuator(run, self.observer, instance, self.log)
        self.states: dict[StateKey, PolicyState] = {}
        self.envelopes: dict[tuple[str, str], Envelope] = {
            (self.target, knob): envelope for knob, envelope in instance.knobs.items()
        }
        self.latest: dict[str, TargetView] = {}
        lens = PolicyLens(lambda: self.specs, lambda: self.states, lambda: self.latest)
        self.approvals = SimulatedApprovals(
            approval_delay_s, approval_answer, lens, self.actuator, self.log
        )
        self.loops = {
            spec.name: CapLoop(
                run,
                self.log,
                spec.name,
                spec.action.admission.controller,
                min_cap=spec.action.admission.min_cap,
                interval_s=spec.action.admission.interval_s,
                params=spec.action.admission.params,
            )
            for spec in self.specs
            if spec.action is not None
            and spec.action.admission is not None
            and spec.applies_to(self.target)
        }
        self._next_tick = 0.0

    def step(self, now: float) -> None:
        """One second of the governor: scrape, protocol, approvals, then tick and fast loops."""
        self.observer.scrape(now)
        self.actuator.step(now)
        self.approvals.step(now)
        due = now >= self._next_tick
        if not due and not self._loops_firing():
            return  # nobody reads the view this second: spare computing it
        view = self.observer.view(now, self.actuator.current())
        self.latest = {self.target: view}
        if due:
            self._next_tick = now + self.interval_s
            self._tick(now, view)
        self._fast_loops(now, view)

    def _loops_firing(self) -> bool:
        return any(
            self.states.get((name, self.target), PolicyState()).phase is Phase.FIRING or loop.active
            for name, loop in self.loops.items()
        )

    def _tick(self, now: float, view: TargetView) -> None:
        result = tick(
            self.specs,
            self.states,
            self.latest,
            envelopes=self.envelopes,
            history=self.actuator.history,
            now=now,
            wall=wall(now),
        )
        self.states = result.states
        routing = route(
            result.accepted,
            {self.target: self.instance},
            self.actuator.quarantined,
            actuated=True,
        )
        for _, request in routing.auto:
            self.actuator.submit(request, now)
        for request in routing.proposals:
            self.approvals.propose(request, now)

    def _fast_loops(self, now: float, view: TargetView) -> None:
        if self.run.gate is None:
            return
        max_num_seqs = self.run.snapshot().settings.max_num_seqs
        if self.run.gate.cap > max_num_seqs:  # a restart lowered max-num-seqs under the cap
            set_cap(self.run, self.log, now, "max-num-seqs", max_num_seqs)
        for name, loop in self.loops.items():
            state = self.states.get((name, self.target), PolicyState())
            if state.phase is Phase.FIRING:
                loop.step(now, view)
            elif loop.active:
                loop.stop(now)
        if not any(loop.active for loop in self.loops.values()):
            set_cap(self.run, self.log, now, "max-num-seqs", max_num_seqs)
