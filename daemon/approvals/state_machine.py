"""What a click does, and the other steps of a proposal's life: pure functions of their inputs.

:func:`decide` judges a click on a proposal given the rules and a :class:`Recheck` of the world
made *at click time*. Checks run cheapest and most suspicious first::

    replayed → wrong proposal → wrong hash → unauthorised → already decided → expired
    reject: rejected
    approve: same approver → superseded → stale → no longer needed → uncertain → frozen
             → vetoed → waiting for a second approver | approved (apply now)

A refusal leaves the proposal pending when its cause may pass (a freeze, a veto, data not
known yet) and closes it when it cannot (expired, superseded, stale, no longer needed). The
engine persists the returned record, edits the message when the state changed, tells the
clicker the refusal otherwise, and acts only when :attr:`Outcome.apply` is true, which happens
once per proposal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import Enum

from daemon.approvals.authorisation import ApprovalRules
from daemon.approvals.clicks import Action, Click
from daemon.approvals.records import ProposalRecord, State, Vote, move
from daemon.approvals.wording import format_value, utc_text


class Refusal(Enum):
    """Why a click was refused."""

    REPLAYED = "replayed"
    WRONG_PROPOSAL = "wrong_proposal"
    WRONG_HASH = "wrong_hash"
    UNAUTHORISED = "unauthorised"
    ALREADY_DECIDED = "already_decided"
    EXPIRED = "expired"
    SAME_APPROVER = "same_approver"
    SUPERSEDED = "superseded"
    STALE = "stale"
    NO_LONGER_NEEDED = "no_longer_needed"
    UNCERTAIN = "uncertain"
    FROZEN = "frozen"
    VETOED = "vetoed"


@dataclass(frozen=True, slots=True)
class Recheck:
    """The world at click time, as the engine found it.

    Attributes:
        condition_holds: Whether the policy's condition still holds (None: no fresh data).
        knobs: Each knob of the proposal and its value now (None or absent: unknown).
        newer_proposal: The id of a newer proposal for the same instance and knob, if any.
        freeze: The reason of a freeze in force on the instance or the governor, if any.
        veto: The policy that forbids this move now, if any.
    """

    condition_holds: bool | None
    knobs: Mapping[str, float | None] = field(default_factory=dict)
    newer_proposal: str | None = None
    freeze: str | None = None
    veto: str | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a click did.

    Attributes:
        record: The record after the click (persist it when it differs from the one given).
        refusal: Why the click was refused; None when it was accepted.
        message: One sentence for the clicker and, when the state changed, for the message.
        apply: Act now. True only on the click that approved the proposal.
    """

    record: ProposalRecord
    refusal: Refusal | None
    message: str
    apply: bool = False

    @property
    def accepted(self) -> bool:
        """Whether the click counted."""
        return self.refusal is None


def decide(record: ProposalRecord, click: Click, recheck: Recheck, rules: ApprovalRules) -> Outcome:
    """Judge ``click`` on ``record``; see the module docstring for the order of checks."""
    suspicious = _click_refusal(record, click, rules)
    if suspicious is not None:
        return Outcome(record, *suspicious)
    # From here on the clicker is authorised: remember the click, so that a replay of it is
    # refused even when the reason it was refused this time (a freeze, say) has passed.
    record = record.saw(click.click_id)
    proposal = record.proposal
    if not record.open:
        return Outcome(record, Refusal.ALREADY_DECIDED, _already(record))
    vote = Vote(click.user, click.action, click.at, click.via)
    if click.at >= proposal.expires_at:
        message = f"the proposal expired at {utc_text(proposal.expires_at)}"
        expired = replace(move(record, State.EXPIRED, click.at, message), decided_by=vote)
        return Outcome(expired, Refusal.EXPIRED, message)
    if click.action is Action.REJECT:
        rejected = replace(move(record, State.REJECTED, click.at), decided_by=vote)
        return Outcome(rejected, None, f"rejected by {click.user}")
    return _approve(record, vote, recheck, rules)


def _click_refusal(
    record: ProposalRecord, click: Click, rules: ApprovalRules
) -> tuple[Refusal, str] | None:
    """A refusal for the click itself, whatever the proposal's state: it changes nothing."""
    proposal = record.proposal
    if click.click_id in record.seen_clicks:
        return Refusal.REPLAYED, "this click was already handled"
    if click.proposal_id != proposal.id:
        return Refusal.WRONG_PROPOSAL, f"this is not proposal {proposal.id}"
    if click.change_hash != proposal.change_hash:
        return Refusal.WRONG_HASH, "the button does not match the change of this proposal"
    if not rules.admits(proposal.risk, click.user, click.groups):
        return Refusal.UNAUTHORISED, f"you may not decide {proposal.risk.value} proposals"
    return None


def _approve(record: ProposalRecord, vote: Vote, recheck: Recheck, rules: ApprovalRules) -> Outcome:
    if any(earlier.user == vote.user for earlier in record.approvals):
        message = "you already approved it: a second, different approver is needed"
        return Outcome(record, Refusal.SAME_APPROVER, message)
    closing = _closing_refusal(record, recheck)
    if closing is not None:
        refusal, state, message = closing
        closed = replace(move(record, state, vote.at, message), decided_by=vote)
        return Outcome(closed, refusal, message)
    waiting = _waiting_refusal(record, recheck)
    if waiting is not None:
        return Outcome(record, waiting[0], waiting[1])
    approvals = (*record.approvals, vote)
    needed = rules.approvals_needed(record.proposal.risk)
    if len(approvals) < needed:
        message = f"approval {len(approvals)} of {needed}: waiting for another approver"
        return Outcome(replace(record, approvals=approvals), None, message)
    approved = move(record, State.APPROVED, vote.at)
    approved = replace(approved, approvals=approvals, decided_by=vote)
    return Outcome(approved, None, f"approved by {vote.user}", apply=True)


def _closing_refusal(record: ProposalRecord, recheck: Recheck) -> tuple[Refusal, State, str] | None:
    """A refusal whose cause cannot pass: the proposal is closed with it."""
    if recheck.newer_proposal is not None:
        message = f"superseded by proposal {recheck.newer_proposal}"
        return Refusal.SUPERSEDED, State.SUPERSEDED, message
    for m in record.proposal.moves:
        now = recheck.knobs.get(m.knob)
        if now is not None and not math.isclose(now, m.old, rel_tol=1e-9, abs_tol=1e-12):
            message = (
                f"{m.knob} is now {format_value(m.knob, now)}; "
                f"the proposal assumed {format_value(m.knob, m.old)}"
            )
            return Refusal.STALE, State.STALE, message
    if recheck.condition_holds is False:
        message = "the condition no longer holds"
        return Refusal.NO_LONGER_NEEDED, State.NO_LONGER_NEEDED, message
    return None


def _waiting_refusal(record: ProposalRecord, recheck: Recheck) -> tuple[Refusal, str] | None:
    """A refusal whose cause may pass: the proposal stays pending."""
    unknown = [m.knob for m in record.proposal.moves if recheck.knobs.get(m.knob) is None]
    if recheck.condition_holds is None or unknown:
        what = f"the current {', '.join(unknown)}" if unknown else "whether the condition holds"
        return Refusal.UNCERTAIN, f"{what} is not known right now; try again shortly"
    if recheck.freeze is not None:
        return Refusal.FROZEN, f"a freeze is in force: {recheck.freeze}"
    if recheck.veto is not None:
        return Refusal.VETOED, f"vetoed by {recheck.veto} for now"
    return None


def _already(record: ProposalRecord) -> str:
    who = f" by {record.decided_by.user}" if record.decided_by is not None else ""
    when = f" at {utc_text(record.changed_at)}" if record.changed_at is not None else ""
    return f"already {record.state.value.replace('_', ' ')}{who}{when}"


def expire(record: ProposalRecord, now: datetime) -> ProposalRecord:
    """The record with its expiry applied: a pending proposal past its time becomes expired.

    Idempotent, for the engine's sweeper and for the records loaded after a restart.
    """
    proposal = record.proposal
    if record.open and now >= proposal.expires_at:
        message = f"nobody decided before {utc_text(proposal.expires_at)}"
        return move(record, State.EXPIRED, now, message)
    return record


def supersede(record: ProposalRecord, newer_id: str, at: datetime) -> ProposalRecord:
    """A newer proposal for the same instance and knob replaces this pending one."""
    return move(record, State.SUPERSEDED, at, f"superseded by proposal {newer_id}")


def withdraw(record: ProposalRecord, at: datetime, reason: str) -> ProposalRecord:
    """The condition stopped holding while the proposal waited."""
    return move(record, State.NO_LONGER_NEEDED, at, reason)


def applied(record: ProposalRecord, at: datetime, detail: str = "") -> ProposalRecord:
    """The actuator applied the approved change."""
    return move(record, State.APPLIED, at, detail)


def failed(record: ProposalRecord, at: datetime, reason: str) -> ProposalRecord:
    """The actuator could not apply the approved change (or refused it at preflight)."""
    return move(record, State.FAILED, at, reason)


def verified(record: ProposalRecord, at: datetime, detail: str = "") -> ProposalRecord:
    """After the change, vLLM came back healthy and the knob has its new value."""
    return move(record, State.VERIFIED, at, detail)


def reverted(record: ProposalRecord, at: datetime, reason: str) -> ProposalRecord:
    """After the change, verification failed and the old value was restored."""
    return move(record, State.REVERTED, at, reason)


def rollout_moved(record: ProposalRecord, to: State, at: datetime, detail: str) -> ProposalRecord:
    """A group change's rollout moved: the record says where it is (``detail``: how far).

    Staying ``rolling_out`` only updates the detail; the record is returned unchanged when
    nothing changed, so that following a rollout writes nothing between its moves.
    """
    if record.state is to:
        return record if record.reason == detail else replace(record, reason=detail)
    return move(record, to, at, detail)
