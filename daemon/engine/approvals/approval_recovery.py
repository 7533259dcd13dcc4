"""What became of an approved change an earlier governor left unfinished: the journal says.

A governor that stops between a click and the change's outcome leaves the proposal
``approved``. Nothing in the next governor will run it again (a click is single-use), so its
fate is read from the actuation journal, where the actuator writes every change ahead of it:

* the first change of the proposal's policy on its server started after the approval is its
  change; a closed one gives the outcome (done, reverted, refused...);
* an open one is being reconciled by the actuation runner (rolled forward or back at start):
  the answer is "not yet", never a guess;
* no change at all: the governor stopped before running it; failed, to be proposed again.
"""

from __future__ import annotations

from collections.abc import Sequence

from daemon.approvals.records import ProposalRecord
from daemon.core.actuation import FAILED, OPEN, ActuationResult, JournalEntry

NEVER_RAN = "the governor restarted before the change ran; propose it again"


def interrupted_outcome(
    record: ProposalRecord, newest_first: Sequence[JournalEntry]
) -> ActuationResult | None:
    """The outcome of ``record``'s approved change, or None while its journal entry is open."""
    proposal = record.proposal
    since = record.changed_at or proposal.created_at
    entry = next(
        (
            e
            for e in reversed(newest_first)
            if e.target == proposal.instance
            and e.policy == proposal.policy
            and e.started_at >= since
        ),
        None,
    )
    if entry is None:
        return ActuationResult(proposal.instance, proposal.policy, FAILED, NEVER_RAN)
    if entry.state == OPEN:
        return None
    return ActuationResult(
        proposal.instance, proposal.policy, entry.state, entry.outcome, entry_id=entry.id
    )
