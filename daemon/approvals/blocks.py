"""The Slack message of a proposal, as Block Kit: while it waits, and once it is decided.

One function renders a record whatever its state: a pending proposal gets Approve (with a
confirm dialog), Reject and Details buttons whose ``value`` binds them to the proposal id and
change hash; any other state gets the same facts, the outcome, who decided and when, and no
buttons, so an old message cannot be clicked into doing anything. Texts are clipped to Block
Kit's limits, so long evidence never makes Slack refuse the message.
"""

from __future__ import annotations

from typing import Any

from daemon.approvals.clicks import ButtonKind, button_value
from daemon.approvals.forecast import Forecast
from daemon.approvals.proposal import Proposal
from daemon.approvals.records import ProposalRecord, State, Vote
from daemon.approvals.wording import (
    clip,
    format_duration,
    format_signal,
    format_value,
    slack_date,
    thresholds,
    utc_text,
)

Block = dict[str, Any]

HEADER_LIMIT = 150
TEXT_LIMIT = 3000
FIELD_LIMIT = 2000
CONFIRM_TEXT_LIMIT = 300
SHORT_HASH = 12

_HEADLINES: dict[State, str] = {
    State.PENDING: ":raised_hand: Approval needed",
    State.APPROVED: ":hourglass_flowing_sand: Approved, applying",
    State.APPLIED: ":white_check_mark: Applied",
    State.VERIFIED: ":white_check_mark: Applied and verified",
    State.REVERTED: ":leftwards_arrow_with_hook: Applied, then reverted",
    State.FAILED: ":x: Approved, but failed",
    State.REJECTED: ":no_entry_sign: Rejected",
    State.EXPIRED: ":hourglass: Expired",
    State.SUPERSEDED: ":arrows_counterclockwise: Superseded",
    State.NO_LONGER_NEEDED: ":zzz: No longer needed",
    State.STALE: ":warning: Refused: out of date",
    State.ROLLING_OUT: ":arrows_counterclockwise: Approved, rolling out to the group",
    State.ROLLED_OUT: ":white_check_mark: Rolled out to the group",
    State.ROLLED_BACK: ":leftwards_arrow_with_hook: Canary failed, rolled back",
    State.ABORTED: ":octagonal_sign: Rollout stopped",
}
# States a click moved the proposal into without anyone deciding it: the clicker is named as
# the one whose click found the problem, not as the one who decided.
_REFUSED = frozenset({State.EXPIRED, State.SUPERSEDED, State.NO_LONGER_NEEDED, State.STALE})
_DONE = frozenset(
    {
        State.APPROVED,
        State.APPLIED,
        State.VERIFIED,
        State.REJECTED,
        State.ROLLING_OUT,
        State.ROLLED_OUT,
    }
)


def fallback_text(record: ProposalRecord) -> str:
    """The message's plain ``text``: notifications and screen readers show it."""
    proposal = record.proposal
    headline = _HEADLINES[record.state].split(" ", 1)[1]
    where = f"{proposal.instance} on {proposal.host}"
    return clip(f"{headline}: {proposal.summary()} ({where})", TEXT_LIMIT)


def message_blocks(record: ProposalRecord, approvals_needed: int = 1) -> list[Block]:
    """The blocks of the proposal's message in the record's current state."""
    proposal = record.proposal
    blocks = [_header(record), _facts(record), _why(proposal), _effect(proposal)]
    if proposal.forecast is not None:
        blocks.append(_forecast(proposal.forecast))
    if record.open:
        blocks.append(_context(record, approvals_needed))
        blocks.append(_buttons(proposal))
    else:
        blocks.append(_outcome(record))
        blocks.append(_context(record, approvals_needed))
    return blocks


def details_blocks(proposal: Proposal) -> list[Block]:
    """Everything about a proposal, for the ephemeral answer to the Details button."""
    lines = [
        f"*Proposal* `{proposal.id}` of policy *{proposal.policy}*",
        f"*Change hash* `{proposal.change_hash}`",
        f"*Created* {slack_date(proposal.created_at)}",
        f"*Expires* {slack_date(proposal.expires_at)}",
        f"*Condition* `{proposal.why.condition}`",
    ]
    signals = [f"`{name}` = {format_signal(value)}" for name, value in proposal.why.signals] or [
        "(no signals)"
    ]
    return [
        _section(clip("\n".join(lines), TEXT_LIMIT)),
        _section(clip("*Signals read*\n" + "\n".join(signals), TEXT_LIMIT)),
    ]


def thread_text(record: ProposalRecord) -> str:
    """A line for the proposal's thread when its state changes (applied, verified...)."""
    headline = _HEADLINES[record.state]
    when = f" at {utc_text(record.changed_at)}" if record.changed_at is not None else ""
    reason = f": {record.reason}" if record.reason else ""
    return clip(f"{headline}{when}{reason}", TEXT_LIMIT)


def _header(record: ProposalRecord) -> Block:
    proposal = record.proposal
    title = f"{_HEADLINES[record.state]}: {proposal.summary()} on {proposal.instance}"
    return {
        "type": "header",
        "text": {"type": "plain_text", "text": clip(title, HEADER_LIMIT), "emoji": True},
    }


def _facts(record: ProposalRecord) -> Block:
    proposal = record.proposal
    fields = [("Host", f"`{proposal.host}`"), ("Instance", f"`{proposal.instance}`")]
    if proposal.operation is not None:
        fields.append(("Operation", f"`{proposal.operation}`"))
    if proposal.moves:
        fields.append(("Knob", "\n".join(f"`{m.knob}`" for m in proposal.moves)))
        fields.append(
            ("Old → new", "\n".join(_move_text(m.knob, m.old, m.new) for m in proposal.moves))
        )
    fields.append(("Policy", proposal.policy))
    if record.open:
        fields.append(("Expires", slack_date(proposal.expires_at)))
    else:
        fields.append(("Proposed", slack_date(proposal.created_at)))
    verb = "proposes" if record.open else "proposed"
    return {
        "type": "section",
        "text": {
            "type": "mrkdwn",
            "text": f"*{proposal.policy}* {verb} a change on *{proposal.instance}*.",
        },
        "fields": [
            {"type": "mrkdwn", "text": clip(f"*{name}*\n{value}", FIELD_LIMIT)}
            for name, value in fields
        ],
    }


def _move_text(knob: str, old: float, new: float) -> str:
    return f"{format_value(knob, old)} → *{format_value(knob, new)}*"


def _why(proposal: Proposal) -> Block:
    why = proposal.why
    lines = ["*Why*" + (f": {why.note}" if why.note else "")]
    for name, value in why.signals:
        limits = thresholds(why.condition, name)
        against = f" (threshold {', '.join(limits)})" if limits else ""
        lines.append(f"• `{name}` = *{format_signal(value)}*{against}")
    held = f" for {format_duration(why.held_for_s)}" if why.held_for_s is not None else ""
    lines.append(f"Condition `{clip(why.condition, 500)}` held{held}.")
    return _section(clip("\n".join(lines), TEXT_LIMIT))


def _effect(proposal: Proposal) -> Block:
    return {
        "type": "section",
        "fields": [
            {"type": "mrkdwn", "text": clip(f"*Expected effect*\n{proposal.effect}", FIELD_LIMIT)},
            {"type": "mrkdwn", "text": clip(f"*Cost*\n{proposal.cost}", FIELD_LIMIT)},
        ],
    }


def _forecast(forecast: Forecast) -> Block:
    """What the what-if predicted, and the workload it rests on."""
    lines = [
        f"*Predicted by the what-if* ({forecast.gain_text()}, the restart's loss included)",
        f"• SLO attainment {forecast.now.slo_attainment:.1%} → "
        f"*{forecast.after.slo_attainment:.1%}*",
        f"• Goodput {forecast.now.goodput_rps:.2f} → *{forecast.after.goodput_rps:.2f}* req/s",
        f"• Restart: {forecast.cost_text().removeprefix('restarts vLLM: ')}",
        f"• Workload: {forecast.workload_text()}",
    ]
    return _section(clip("\n".join(lines), TEXT_LIMIT))


def _outcome(record: ProposalRecord) -> Block:
    lines = [f"*Outcome:* {record.state.value.replace('_', ' ')}"]
    if record.decided_by is not None:
        label = "Refused when clicked by" if record.state in _REFUSED else "Decided by"
        lines.append(f"*{label}* {_who_when(record.decided_by)}")
    if len(record.approvals) > 1:
        lines.append("*Approvals* " + ", ".join(_who_when(vote) for vote in record.approvals))
    if record.changed_at is not None:
        lines.append(f"*Last change* {slack_date(record.changed_at)}")
    if record.reason:
        label = "Detail" if record.state in _DONE else "Reason"
        lines.append(f"*{label}* {record.reason}")
    return _section(clip("\n".join(lines), TEXT_LIMIT))


def _context(record: ProposalRecord, approvals_needed: int) -> Block:
    proposal = record.proposal
    parts = [f"Proposal `{proposal.id}`", f"change `sha256:{proposal.change_hash[:SHORT_HASH]}`"]
    parts.append(f"risk *{proposal.risk.value}*")
    if record.open and approvals_needed > 1:
        so_far = ", ".join(_who(vote.user) for vote in record.approvals) or "none yet"
        parts.append(f"needs {approvals_needed} approvers (so far: {so_far})")
    return {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": clip(" · ".join(parts), TEXT_LIMIT)}],
    }


def _buttons(proposal: Proposal) -> Block:
    value = button_value(proposal.id, proposal.change_hash)
    confirm_text = (
        f"{proposal.summary()} on {proposal.instance} ({proposal.host}). {proposal.cost}."
    )
    approve = _button(ButtonKind.APPROVE, "Approve", value, "primary")
    approve["confirm"] = {
        "title": {"type": "plain_text", "text": "Approve this change?"},
        "text": {"type": "mrkdwn", "text": clip(confirm_text, CONFIRM_TEXT_LIMIT)},
        "confirm": {"type": "plain_text", "text": "Approve"},
        "deny": {"type": "plain_text", "text": "Cancel"},
        "style": "primary",
    }
    return {
        "type": "actions",
        "block_id": f"approval.{proposal.id}",
        "elements": [
            approve,
            _button(ButtonKind.REJECT, "Reject", value, "danger"),
            _button(ButtonKind.DETAILS, "Details", value, None),
        ],
    }


def _button(kind: ButtonKind, label: str, value: str, style: str | None) -> Block:
    button: Block = {
        "type": "button",
        "action_id": kind.action_id,
        "text": {"type": "plain_text", "text": label},
        "value": value,
    }
    if style is not None:
        button["style"] = style
    return button


def _section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _who(user: str) -> str:
    # Slack user ids become mentions; the CLI's local users (unix:alice) are named as such.
    if user.startswith("unix:"):
        return f"{user.removeprefix('unix:')} (CLI)"
    return f"<@{user}>"


def _who_when(vote: Vote) -> str:
    return f"{_who(vote.user)} ({vote.action.value}) at {slack_date(vote.at)}"
