"""A group change's approved proposal follows its rollout: rolling out, then where it came to.

The click that approves a group change hands it to the fleet's rollout (:mod:`.group_changes`),
and the proposal's store marks the record as following the group's rollout
(``rollout_group``). The *group proposal follower* task reads each such rollout from etcd every
period and moves the record: ``rolling_out`` while the canary and the members change (its
reason says how far), then ``rolled_out``, ``rolled_back`` (the canary failed its analysis and
was reverted) or ``aborted``. The governor that holds the record follows the rollout whoever
drives it, so a record is settled even when another governor finished the rollout, or when
this one restarted meanwhile. Only records still following are read: an idle governor reads
nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial

from daemon.approvals.records import ProposalRecord, State
from daemon.approvals.state_machine import rollout_moved
from daemon.core.clock import Clock
from daemon.engine.runtime.supervisor import Readiness
from daemon.engine.storage.proposal_store import ProposalStore
from daemon.fleet.errors import FleetError
from daemon.fleet.rollout_lines import outcome_of
from daemon.fleet.rollout_state import Phase, Rollout, RolloutMoveError, Step
from daemon.fleet.rollout_store import RolloutStore

log = logging.getLogger(__name__)

Advance = Callable[[str, Callable[[ProposalRecord], ProposalRecord]], None]
_ENDS = {"rolled_out": State.ROLLED_OUT, "rolled_back": State.ROLLED_BACK}


def where(proposal_id: str, rollout: Rollout | None) -> tuple[State, str] | None:
    """The state a group change's approved proposal is in, given its rollout (None: unchanged).

    A rollout still ``proposed`` has not taken the decision yet (it is on its way). A rollout
    gone, or replaced by another proposal's, can no longer tell: the record is aborted.
    """
    if rollout is None:
        return State.ABORTED, "its rollout is no longer in etcd"
    if rollout.proposal not in {"", proposal_id}:
        return State.ABORTED, f"its rollout was replaced by proposal {rollout.proposal}'s"
    if rollout.phase is Phase.PROPOSED:
        return None
    changed = sum(rollout.step(member) is Step.APPLIED for member in rollout.members)
    last = rollout.history[-1] if rollout.history else rollout.phase.value
    detail = f"{changed} of {len(rollout.members)} members changed; {last}"
    if not rollout.phase.finished:
        return State.ROLLING_OUT, f"{rollout.phase.value}, canary {rollout.canary}: {detail}"
    if rollout.phase is Phase.REJECTED:
        return State.ABORTED, f"its rollout was rejected: {last}"
    return _ENDS.get(outcome_of(rollout), State.ABORTED), detail


class RolloutFollower:
    """Moves each following proposal's record as its rollout moves.

    Args:
        proposals: The approvals' store.
        rollouts: The fleet's rollouts.
        advance: The approvals plane's way of moving a stored record on (it counts the
            states reached and edits the Slack message).
        clock: The injected clock.
        poll_s: How often it looks.
    """

    def __init__(
        self,
        proposals: ProposalStore,
        rollouts: RolloutStore,
        *,
        advance: Advance,
        clock: Clock,
        poll_s: float,
    ) -> None:
        self._proposals = proposals
        self._rollouts = rollouts
        self._advance = advance
        self._clock = clock
        self._poll_s = poll_s

    async def run(self, readiness: Readiness) -> None:
        """The eternal task: a look every ``poll_s`` (a failed read is tried at the next)."""
        readiness.started()
        while True:
            try:
                await self.look()
            except FleetError as exc:
                log.warning("rollouts of approved proposals not read", extra={"error": str(exc)})
            await asyncio.sleep(self._poll_s)

    async def look(self) -> None:
        """Follow every record whose rollout has not ended yet."""
        for stored in self._proposals.following():
            record = stored.record
            proposal = record.proposal
            group = stored.rollout_group or ""
            try:
                found = await self._rollouts.read(group, proposal.policy)
            except RolloutMoveError as exc:
                log.warning("rollout unreadable", extra={"group": group, "error": str(exc)})
                continue
            moved = where(proposal.id, None if found is None else found.rollout)
            if moved is None or (record.state, record.reason) == moved:
                continue
            state, detail = moved
            at = self._clock.wall()
            self._advance(proposal.id, partial(rollout_moved, to=state, at=at, detail=detail))
            log.info(
                "group proposal follows its rollout",
                extra={"proposal": proposal.id, "group": group, "state": state.value},
            )
