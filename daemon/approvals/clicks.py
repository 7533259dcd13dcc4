"""Clicks: what a person asked for, from a Slack button or the CLI, before any check.

A button's ``value`` carries the proposal id and the change hash it showed
(:func:`button_value`). :func:`read_press` turns a Slack ``block_actions`` payload (from a
Socket Mode envelope or the HTTP endpoint, already authenticated) into a :class:`Press`; the
engine adds the user's groups to make a :class:`Click`, which the state machine judges. Nothing
here trusts the payload: it only refuses shapes it cannot read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

ACTION_PREFIX = "approval."
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_HASH = re.compile(r"[0-9a-f]{64}")


class Action(Enum):
    """What a click asks for."""

    APPROVE = "approve"
    REJECT = "reject"


class ButtonKind(Enum):
    """The buttons of a proposal message; their ``action_id`` is ``approval.<kind>``."""

    APPROVE = "approve"
    REJECT = "reject"
    DETAILS = "details"

    @property
    def action_id(self) -> str:
        """The Block Kit ``action_id`` of this button."""
        return ACTION_PREFIX + self.value


@dataclass(frozen=True, slots=True)
class Click:
    """One person's approve or reject, channel-agnostic.

    Attributes:
        click_id: Unique per physical click; a redelivery or replay carries the same id.
        user: Who clicked (a Slack user id, or ``unix:<login>`` from the CLI).
        groups: The user's groups, resolved by the engine (never taken from the payload).
        action: Approve or reject.
        proposal_id: The proposal the button belonged to.
        change_hash: The change hash the button carried.
        at: When the governor received it (wall clock).
        via: ``slack`` or ``cli``, for the record.
    """

    click_id: str
    user: str
    groups: frozenset[str]
    action: Action
    proposal_id: str
    change_hash: str
    at: datetime
    via: str = "slack"


@dataclass(frozen=True, slots=True)
class Press:
    """A button press read from a Slack ``block_actions`` payload.

    Attributes:
        kind: Which button.
        user: The Slack user id of who pressed it.
        proposal_id: From the button's value.
        change_hash: From the button's value.
        action_ts: Slack's timestamp of the press, unique per press.
        channel: The channel of the message, to edit it or answer ephemerally.
        message_ts: The message's ts.
    """

    kind: ButtonKind
    user: str
    proposal_id: str
    change_hash: str
    action_ts: str
    channel: str
    message_ts: str

    def click(self, groups: frozenset[str], at: datetime) -> Click:
        """The click this press stands for (approve and reject only).

        Raises:
            ValueError: The press is of the Details button, which decides nothing.
        """
        if self.kind is ButtonKind.DETAILS:
            message = "the Details button decides nothing"
            raise ValueError(message)
        action = Action.APPROVE if self.kind is ButtonKind.APPROVE else Action.REJECT
        click_id = f"slack:{self.user}:{self.kind.value}:{self.action_ts}"
        return Click(click_id, self.user, groups, action, self.proposal_id, self.change_hash, at)


def button_value(proposal_id: str, hash_hex: str) -> str:
    """The ``value`` of a proposal's buttons: ``<id>:<change hash>``."""
    return f"{proposal_id}:{hash_hex}"


def parse_button_value(value: str) -> tuple[str, str] | None:
    """The proposal id and change hash of a button value, or None when it is not one."""
    proposal_id, sep, hash_hex = value.partition(":")
    if not sep or not _ID.fullmatch(proposal_id) or not _HASH.fullmatch(hash_hex):
        return None
    return proposal_id, hash_hex


def read_press(payload: Mapping[str, Any]) -> Press | None:
    """The press of a proposal button in a ``block_actions`` payload, or None.

    None stands for anything else: another kind of payload, another app's button, a value that
    is not ``<id>:<hash>``, or a payload missing the user, channel or message.
    """
    if payload.get("type") != "block_actions":
        return None
    actions = payload.get("actions")
    user = _text(payload.get("user"), "id")
    container = payload.get("container")
    channel = _text(container, "channel_id")
    message_ts = _text(container, "message_ts")
    if not isinstance(actions, list) or len(actions) != 1 or not (user and channel and message_ts):
        return None
    action = actions[0]
    if not isinstance(action, dict):
        return None
    kind = _kind(action.get("action_id"))
    parsed = parse_button_value(str(action.get("value", "")))
    action_ts = action.get("action_ts")
    if kind is None or parsed is None or not isinstance(action_ts, str) or not action_ts:
        return None
    return Press(kind, user, parsed[0], parsed[1], action_ts, channel, message_ts)


def _kind(action_id: object) -> ButtonKind | None:
    if not isinstance(action_id, str) or not action_id.startswith(ACTION_PREFIX):
        return None
    try:
        return ButtonKind(action_id.removeprefix(ACTION_PREFIX))
    except ValueError:
        return None


def _text(container: object, key: str) -> str:
    if not isinstance(container, dict):
        return ""
    value = container.get(key)
    return value if isinstance(value, str) else ""
