"""The approver of a simulation: every proposal answered a fixed delay after it was made.

``--approval-delay SECONDS`` is how long a person takes to click; ``--approval-answer`` is what
they click. The clicks go through the approvals' chat port
(:class:`~daemon.engine.approvals.approval_desk.ApprovalDesk`), as a Slack button's do, so the
daemon judges them as it judges any: authorisation (two approvers where the rules ask for two),
the re-check at click time (the proposing policy's condition still holds, the knobs still have
the values the proposal was made from; otherwise the proposal is withdrawn), then the change
through the actuation protocol.
"""

from __future__ import annotations

import asyncio
import itertools

from daemon.app.simulation.events import APPROVED, PROPOSED, REJECTED, WITHDRAWN, EventLog
from daemon.app.simulation.sandbox import APPROVERS
from daemon.approvals.clicks import Action, Click
from daemon.core.clock import Clock
from daemon.engine.approvals.approval_desk import ApprovalDesk

_LOOK_S = 1.0  # how often the approver looks at the pending proposals
_OUTCOMES = {
    "approved": APPROVED,
    "applied": APPROVED,
    "verified": APPROVED,
    "failed": APPROVED,
    "rejected": REJECTED,
}


class SimulatedApprover:
    """Clicks every proposal ``delay_s`` after it was made.

    Args:
        desk: The approvals' chat port.
        clock: The governor's clock.
        events: Where proposals and answers are logged.
        delay_s: Seconds from a proposal to its click.
        approve: Approve (True) or reject (False).
    """

    def __init__(
        self, desk: ApprovalDesk, clock: Clock, events: EventLog, *, delay_s: float, approve: bool
    ) -> None:
        self._desk = desk
        self._clock = clock
        self._events = events
        self._delay_s = delay_s
        self._action = Action.APPROVE if approve else Action.REJECT
        self._seen: set[str] = set()
        self._clicks = itertools.count(1)

    async def run(self) -> None:
        """Look every second; click what is due."""
        while True:
            self._look()
            await asyncio.sleep(_LOOK_S)

    def _look(self) -> None:
        now = self._clock.wall()
        origin = self._clock.monotonic() - now.timestamp()
        for stored in self._desk.store.pending():
            proposal = stored.record.proposal
            made_at = proposal.created_at.timestamp() + origin
            if proposal.id not in self._seen:
                self._seen.add(proposal.id)
                moves = {m.knob: (float(m.old), float(m.new)) for m in proposal.moves}
                self._events.add(made_at, PROPOSED, proposal.policy, moves, proposal.effect)
            if (now - proposal.created_at).total_seconds() >= self._delay_s:
                self._click(stored.record.proposal.id, proposal.change_hash, proposal.policy)

    def _click(self, proposal_id: str, change_hash: str, policy: str) -> None:
        record = self._desk.store.get(proposal_id)
        if record is None:
            return
        needed = self._desk.approvals_needed(record.record)
        answer = None
        for user in APPROVERS[: max(1, needed) if self._action is Action.APPROVE else 1]:
            click = Click(
                click_id=f"sim-{next(self._clicks)}",
                user=user,
                groups=frozenset(),
                action=self._action,
                proposal_id=proposal_id,
                change_hash=change_hash,
                at=self._clock.wall(),
                via="cli",
            )
            answer = self._desk.judge(click, "the simulated approver said no")
            if not answer.accepted:
                break
        if answer is None:
            return
        kind = _OUTCOMES.get(answer.state, WITHDRAWN)
        detail = "" if kind is APPROVED else answer.reason
        self._events.add(self._clock.monotonic(), kind, policy, detail=detail)
