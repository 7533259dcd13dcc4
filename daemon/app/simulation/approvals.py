"""Approvals in simulation: every proposal is answered after a fixed delay, the same way.

``--approval-delay SECONDS`` is how long a person takes to click; ``--approval-answer`` is what
they click. An approval is judged at click time as the daemon judges it
(:class:`daemon.engine.approvals.approval_recheck.PolicyLens`): the proposing policy's condition
must still hold and every knob must still have the value the proposal was made from; otherwise the
proposal is withdrawn. An approved proposal then goes through the actuation protocol's preflight
like any change. One proposal per (policy, instance) is pending at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from daemon.app.simulation.actuation import VirtualActuator
from daemon.app.simulation.events import APPROVED, PROPOSED, REJECTED, WITHDRAWN, EventLog
from daemon.core.actuation import ChangeRequest
from daemon.engine.approvals.approval_recheck import PolicyLens


class Answer(StrEnum):
    """What the simulated approver clicks."""

    APPROVE = "approve"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class Pending:
    """A proposal waiting for its click."""

    request: ChangeRequest
    answer_at: float


class SimulatedApprovals:
    """Pending proposals, answered ``delay_s`` after they were made.

    Args:
        delay_s: Seconds from a proposal to its answer.
        answer: What every answer is.
        lens: The policies, their states and the latest views, read at click time.
        actuator: Where approved changes go.
        log: Where events go.
    """

    def __init__(
        self,
        delay_s: float,
        answer: Answer,
        lens: PolicyLens,
        actuator: VirtualActuator,
        log: EventLog,
    ) -> None:
        self.delay_s = delay_s
        self.answer = answer
        self.lens = lens
        self.actuator = actuator
        self.log = log
        self.pending: list[Pending] = []

    def propose(self, request: ChangeRequest, now: float) -> None:
        """A new proposal, unless the same policy already waits on the same instance."""
        if any(
            p.request.policy == request.policy and p.request.target == request.target
            for p in self.pending
        ):
            return
        self.pending.append(Pending(request, now + self.delay_s))
        moves = {k: (request.current.get(k, float("nan")), v) for k, v in request.changes.items()}
        self.log.add(now, PROPOSED, request.policy, moves, request.reason)

    def step(self, now: float) -> None:
        """Answer the proposals whose time has come."""
        due = [p for p in self.pending if p.answer_at <= now]
        self.pending = [p for p in self.pending if p.answer_at > now]
        for proposal in due:
            request = proposal.request
            if self.answer is Answer.REJECT:
                self.log.add(now, REJECTED, request.policy, detail="the approver said no")
                continue
            why = self._stale(request)
            if why:
                self.log.add(now, WITHDRAWN, request.policy, detail=why)
                continue
            self.log.add(now, APPROVED, request.policy)
            self.actuator.submit(request, now)

    def _stale(self, request: ChangeRequest) -> str:
        """Why the proposal no longer stands at click time ("" when it does)."""
        holds = self.lens.condition_holds(request.policy, request.target)
        if holds is not True:
            return "its condition no longer holds" if holds is False else "no fresh data"
        current = self.actuator.current()
        for knob, seen in request.current.items():
            if current.get(knob) != seen:
                return f"{knob} is {current.get(knob)} now, not {seen:g}"
        return ""
