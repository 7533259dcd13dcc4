"""Proposal records as JSON, for the state database: every field, and back again exactly.

Times are ISO 8601 with their offset, so a record read after a restart compares equal to the
one written; a record that does not read back (a hand-edited row, a newer schema) raises
:class:`~daemon.approvals.errors.ApprovalError` naming the proposal, rather than being guessed.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from daemon.approvals.clicks import Action
from daemon.approvals.errors import ApprovalError
from daemon.approvals.forecast import Forecast
from daemon.approvals.proposal import KnobMove, Proposal, RiskClass, Why
from daemon.approvals.records import ProposalRecord, State, Vote


def dump_record(record: ProposalRecord) -> str:
    """The record as compact JSON."""
    proposal = record.proposal
    body = {
        "proposal": {
            "id": proposal.id,
            "policy": proposal.policy,
            "instance": proposal.instance,
            "host": proposal.host,
            "moves": [[m.knob, m.old, m.new] for m in proposal.moves],
            "operation": proposal.operation,
            "risk": proposal.risk.value,
            "why": {
                "condition": proposal.why.condition,
                "signals": [[name, value] for name, value in proposal.why.signals],
                "held_for_s": proposal.why.held_for_s,
                "note": proposal.why.note,
            },
            "effect": proposal.effect,
            "cost": proposal.cost,
            "created_at": proposal.created_at.isoformat(),
            "expires_at": proposal.expires_at.isoformat(),
            "forecast": None if proposal.forecast is None else proposal.forecast.to_json(),
        },
        "state": record.state.value,
        "approvals": [_vote(vote) for vote in record.approvals],
        "decided_by": None if record.decided_by is None else _vote(record.decided_by),
        "changed_at": None if record.changed_at is None else record.changed_at.isoformat(),
        "reason": record.reason,
        "seen_clicks": list(record.seen_clicks),
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def load_record(text: str) -> ProposalRecord:
    """The record written by :func:`dump_record`.

    Raises:
        ApprovalError: The text is not such a record.
    """
    try:
        body = json.loads(text)
        return _record(body)
    except (KeyError, TypeError, ValueError) as exc:
        message = f"a stored proposal cannot be read ({type(exc).__name__}: {exc})"
        raise ApprovalError(message) from exc


def _record(body: dict[str, Any]) -> ProposalRecord:
    raw = body["proposal"]
    why = raw["why"]
    proposal = Proposal(
        id=str(raw["id"]),
        policy=str(raw["policy"]),
        instance=str(raw["instance"]),
        host=str(raw["host"]),
        moves=tuple(KnobMove(str(k), float(old), float(new)) for k, old, new in raw["moves"]),
        operation=raw["operation"],
        risk=RiskClass(raw["risk"]),
        why=Why(
            condition=str(why["condition"]),
            signals=tuple((str(name), value) for name, value in why["signals"]),
            held_for_s=why["held_for_s"],
            note=str(why["note"]),
        ),
        effect=str(raw["effect"]),
        cost=str(raw["cost"]),
        created_at=datetime.fromisoformat(raw["created_at"]),
        expires_at=datetime.fromisoformat(raw["expires_at"]),
        # Records stored before forecasts existed have none.
        forecast=None if raw.get("forecast") is None else Forecast.from_json(raw["forecast"]),
    )
    decided = body["decided_by"]
    changed = body["changed_at"]
    return ProposalRecord(
        proposal=proposal,
        state=State(body["state"]),
        approvals=tuple(_read_vote(vote) for vote in body["approvals"]),
        decided_by=None if decided is None else _read_vote(decided),
        changed_at=None if changed is None else datetime.fromisoformat(changed),
        reason=str(body["reason"]),
        seen_clicks=tuple(str(click) for click in body["seen_clicks"]),
    )


def _vote(vote: Vote) -> dict[str, str]:
    return {
        "user": vote.user,
        "action": vote.action.value,
        "at": vote.at.isoformat(),
        "via": vote.via,
    }


def _read_vote(raw: dict[str, str]) -> Vote:
    return Vote(raw["user"], Action(raw["action"]), datetime.fromisoformat(raw["at"]), raw["via"])
