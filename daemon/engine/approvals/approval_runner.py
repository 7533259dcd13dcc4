"""The approved-changes runner: each approved proposal applied once, its outcome recorded.

A judged click that approves queues the proposal's id here; the runner turns the proposal into a
:class:`~daemon.core.actuation.ChangeRequest` and hands it to
:meth:`~daemon.engine.actuation.actuation_plane.ActuationPlane.apply_approved`, the same queue and
actuator checks as an automatic change. The result moves the stored record on (applied, then
verified or reverted; or failed). Approved proposals an earlier governor left are not run again:
their outcome is settled from the journal (:mod:`daemon.engine.approvals.approval_recovery`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from daemon.approvals.records import ProposalRecord, State
from daemon.approvals.state_machine import applied, failed, reverted, verified
from daemon.core.actuation import DONE, FAILED, REVERTED, ActuationResult, ChangeRequest
from daemon.core.clock import Clock
from daemon.core.settings import GovernorConfig
from daemon.engine.actuation.actuation_plane import ActuationPlane
from daemon.engine.approvals.approval_recovery import interrupted_outcome
from daemon.engine.runtime.supervisor import Readiness
from daemon.engine.storage.proposal_store import ProposalStore

log = logging.getLogger(__name__)

Advance = Callable[[str, Callable[[ProposalRecord], ProposalRecord]], None]


class ApprovedChangesRunner:
    """Applies approved proposals through the actuation plane and records what came of them.

    ``advance`` is the plane's way of moving a stored record on (it counts outcomes and wakes
    the Slack messenger), so the runner never saves a record by itself.
    """

    def __init__(
        self,
        config: Callable[[], GovernorConfig],
        clock: Clock,
        store: ProposalStore,
        actuation: ActuationPlane,
        advance: Advance,
    ) -> None:
        self._config = config
        self._clock = clock
        self._store = store
        self._actuation = actuation
        self._advance = advance
        self._approved: asyncio.Queue[str] = asyncio.Queue()

    def submit(self, proposal_id: str) -> None:
        """Queue an approved proposal; the runner applies it (once: it checks the state first)."""
        self._approved.put_nowait(proposal_id)

    async def run(self, readiness: Readiness) -> None:
        """The eternal task: apply each queued proposal in its own task."""
        readiness.started()
        async with asyncio.TaskGroup() as group:
            while True:
                proposal_id = await self._approved.get()
                group.create_task(self._apply(proposal_id), name=f"approved change {proposal_id}")

    def settle_interrupted(self, waiting: set[str]) -> set[str]:
        """Settle approved proposals an earlier governor left; return those still unknown.

        See :mod:`daemon.engine.approvals.approval_recovery`: the outcome is the journal's, and
        a change still open there is being reconciled, so it is waited for rather than guessed.
        """
        if not waiting:
            return waiting
        entries = self._actuation.journal.recent(100)
        left = set()
        for proposal_id in waiting:
            stored = self._store.get(proposal_id)
            if stored is None or stored.record.state is not State.APPROVED:
                continue
            result = interrupted_outcome(stored.record, entries)
            if result is None:
                left.add(proposal_id)
                continue
            log.info(
                "approved proposal settled after a restart",
                extra={"proposal": proposal_id, "state": result.state, "entry": result.entry_id},
            )
            self._record_result(proposal_id, result)
        return left

    async def _apply(self, proposal_id: str) -> None:
        stored = self._store.get(proposal_id)
        if stored is None or stored.record.state is not State.APPROVED:
            return
        record = stored.record
        proposal = record.proposal
        instance = next((i for i in self._config().vllm if i.name == proposal.instance), None)
        if instance is None:
            result = ActuationResult(proposal.instance, proposal.policy, FAILED, "no such server")
        else:
            who = ", ".join(vote.user for vote in record.approvals)
            request = ChangeRequest(
                target=proposal.instance,
                policy=proposal.policy,
                changes={m.knob: m.new for m in proposal.moves},
                current={m.knob: m.old for m in proposal.moves},
                reason=f"{proposal.policy}: approved by {who} (proposal {proposal.id})",
                evidence=dict(proposal.why.signals),
                risk="approval",
                forecast=None if proposal.forecast is None else proposal.forecast.to_json(),
            )
            try:
                result = await self._actuation.apply_approved(instance, request)
            except Exception as exc:
                log.exception("an approved change crashed", extra={"proposal": proposal_id})
                result = ActuationResult(proposal.instance, proposal.policy, FAILED, str(exc))
        self._record_result(proposal_id, result)

    def _record_result(self, proposal_id: str, result: ActuationResult) -> None:
        now = self._clock.wall()
        detail = result.outcome
        if result.state == DONE:
            self._advance(proposal_id, lambda r: applied(r, now, detail))
            self._advance(proposal_id, lambda r: verified(r, now, detail))
        elif result.state == REVERTED:
            self._advance(proposal_id, lambda r: applied(r, now, detail))
            self._advance(proposal_id, lambda r: reverted(r, now, detail))
        else:
            self._advance(proposal_id, lambda r: failed(r, now, f"{result.state}: {detail}"))
        log.info(
            "approved change finished",
            extra={"proposal": proposal_id, "state": result.state, "outcome": detail},
        )
