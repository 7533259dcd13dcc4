"""A proposal's fate: its state, the votes cast on it, and the states it may move to.

::

    pending ──► approved ──► applied ──► verified
       │            │            └─────► reverted
       │            ├──────────► failed
       │            └──────────► rolling_out ──► rolled_out     a group change: its rollout
       │                              ├────────► rolled_back    the canary failed, reverted
       │                              └────────► aborted        stopped otherwise
       ├──► rejected
       ├──► expired
       ├──► superseded          a newer proposal for the same instance and knob
       ├──► no_longer_needed    the condition stopped holding
       └──► stale               the knob moved since the proposal was made

A group change's proposal (``scope: group``) follows its rollout in the fleet: from
``approved`` to ``rolling_out`` while the canary and the members change (or straight to an
outcome, if the rollout ended between two looks), then to where the rollout came to.

Every state but ``pending``, ``approved``, ``applied`` and ``rolling_out`` is final. Only
``pending`` takes clicks, so a decision is single-use: the click that moves a proposal out of
``pending`` is the only one that ever counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum

from daemon.approvals.clicks import Action
from daemon.approvals.errors import InvalidTransition
from daemon.approvals.proposal import Proposal

SEEN_CLICKS_KEPT = 256


class State(Enum):
    """Where a proposal stands."""

    PENDING = "pending"
    APPROVED = "approved"  # decided yes; the engine is applying it
    REJECTED = "rejected"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    NO_LONGER_NEEDED = "no_longer_needed"
    STALE = "stale"
    APPLIED = "applied"
    FAILED = "failed"
    VERIFIED = "verified"
    REVERTED = "reverted"
    ROLLING_OUT = "rolling_out"  # a group change: its canary or members are being changed
    ROLLED_OUT = "rolled_out"  # every member of the group changed
    ROLLED_BACK = "rolled_back"  # the canary failed its analysis and was reverted
    ABORTED = "aborted"  # the rollout stopped otherwise (what was applied stays)


ROLLOUT_ENDS = frozenset({State.ROLLED_OUT, State.ROLLED_BACK, State.ABORTED})


TRANSITIONS: Mapping[State, frozenset[State]] = {
    State.PENDING: frozenset(
        {
            State.APPROVED,
            State.REJECTED,
            State.EXPIRED,
            State.SUPERSEDED,
            State.NO_LONGER_NEEDED,
            State.STALE,
        }
    ),
    State.APPROVED: frozenset({State.APPLIED, State.FAILED, State.ROLLING_OUT, *ROLLOUT_ENDS}),
    State.APPLIED: frozenset({State.VERIFIED, State.REVERTED}),
    State.ROLLING_OUT: ROLLOUT_ENDS,
}


@dataclass(frozen=True, slots=True)
class Vote:
    """One accepted click: who, what, when and through which channel."""

    user: str
    action: Action
    at: datetime
    via: str


@dataclass(frozen=True, slots=True)
class ProposalRecord:
    """A proposal and its fate; what the engine persists and the message is rendered from.

    Attributes:
        proposal: The proposal, unchanged since it was made.
        state: Where it stands.
        approvals: Approvals accepted so far (under the two-person rule the first waits here).
        decided_by: The vote that moved it out of ``pending`` (None: no person decided).
        changed_at: When the state last changed (None: never).
        reason: Why it is in this state, for people (a refusal's reason, a failure).
        seen_clicks: Ids of the authorised clicks already judged, to refuse replays.
    """

    proposal: Proposal
    state: State = State.PENDING
    approvals: tuple[Vote, ...] = ()
    decided_by: Vote | None = None
    changed_at: datetime | None = None
    reason: str = ""
    seen_clicks: tuple[str, ...] = ()

    @property
    def open(self) -> bool:
        """Whether it still takes clicks."""
        return self.state is State.PENDING

    @property
    def final(self) -> bool:
        """Whether nothing can happen to it any more."""
        return self.state not in TRANSITIONS

    def saw(self, click_id: str) -> ProposalRecord:
        """The record after judging the click ``click_id`` (the oldest ids are forgotten)."""
        kept = (*self.seen_clicks, click_id)[-SEEN_CLICKS_KEPT:]
        return replace(self, seen_clicks=kept)


def move(record: ProposalRecord, to: State, at: datetime, reason: str = "") -> ProposalRecord:
    """The record in state ``to``; the one place where states change.

    Raises:
        InvalidTransition: ``to`` cannot follow the record's state.
    """
    if to not in TRANSITIONS.get(record.state, frozenset()):
        message = (
            f"proposal {record.proposal.id} is {record.state.value}; it cannot become {to.value}"
        )
        raise InvalidTransition(message)
    return replace(record, state=to, changed_at=at, reason=reason)
