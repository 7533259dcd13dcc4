"""Proposals as the control socket shows them (``vllm-governor proposals --json``).

The shape is a contract with the CLI and the demo::

    {"id", "target", "policy", "state", "changes": {KNOB: {"old", "new"}}, "reason",
     "created_at", "expires_at", "hash", "votes": [{"user", "action", "at", "via"}], ...}
"""

from __future__ import annotations

from typing import Any

from daemon.approvals.records import ProposalRecord, Vote
from daemon.approvals.wording import format_duration, format_signal
from daemon.engine.storage.proposal_store import StoredProposal


def proposal_json(stored: StoredProposal, approvals_needed: int) -> dict[str, Any]:
    """One proposal for the control socket."""
    record = stored.record
    proposal = record.proposal
    return {
        "id": proposal.id,
        "target": proposal.instance,
        "host": proposal.host,
        "policy": proposal.policy,
        "state": record.state.value,
        "summary": proposal.summary(),
        "operation": proposal.operation,
        "changes": {m.knob: {"old": m.old, "new": m.new} for m in proposal.moves},
        "reason": record.reason or why_text(record),
        "why": why_text(record),
        "effect": proposal.effect,
        "cost": proposal.cost,
        # A tuned change's prediction: now and after, the restart's cost, the workload.
        "forecast": None if proposal.forecast is None else proposal.forecast.to_json(),
        "risk": proposal.risk.value,
        "approvals_needed": approvals_needed,
        "created_at": proposal.created_at.isoformat(),
        "expires_at": proposal.expires_at.isoformat(),
        "changed_at": None if record.changed_at is None else record.changed_at.isoformat(),
        "hash": proposal.change_hash,
        "votes": [_vote(vote) for vote in votes_of(record)],
        "slack_message": None
        if stored.ts is None
        else {"channel": stored.channel, "ts": stored.ts},
    }


def why_text(record: ProposalRecord) -> str:
    """The evidence in one line: the condition, how long it held, the values read."""
    why = record.proposal.why
    held = "" if why.held_for_s is None else f" for {format_duration(why.held_for_s)}"
    # Rounded as people read them (4.392405063291138 is 4.392), as the Slack message shows them.
    values = ", ".join(f"{name}={format_signal(value)}" for name, value in why.signals)
    note = f" ({why.note})" if why.note else ""
    return f"{why.condition} held{held}" + (f" [{values}]" if values else "") + note


def votes_of(record: ProposalRecord) -> list[Vote]:
    """Every accepted vote: the approvals, and the deciding one if it is not among them."""
    votes = list(record.approvals)
    if record.decided_by is not None and record.decided_by not in votes:
        votes.append(record.decided_by)
    return votes


def _vote(vote: Vote) -> dict[str, str]:
    return {
        "user": vote.user,
        "action": vote.action.value,
        "at": vote.at.isoformat(),
        "via": vote.via,
    }
