"""Interactive payloads as Slack builds them when someone presses a button of a message.

A press can only carry what the message shows: :func:`block_actions` takes the button (its
``action_id``, ``block_id`` and ``value``) from the message as stored, unless a test overrides
the value to play a tampered or forged click.
"""

from __future__ import annotations

from typing import Any

from tests.support.slack_double.store import Message

TEAM = {"id": "T0DOUBLE", "domain": "double"}


def find_button(blocks: list[dict[str, Any]], action_id: str) -> tuple[str, dict[str, Any]]:
    """The ``block_id`` and element of the button ``action_id`` in ``blocks``."""
    for block in blocks:
        for element in block.get("elements", []):
            if element.get("type") == "button" and element.get("action_id") == action_id:
                return str(block.get("block_id", "")), element
    message = f"no button {action_id!r} in the message"
    raise AssertionError(message)


def block_actions(
    message: Message,
    user_id: str,
    action_id: str,
    *,
    action_ts: str,
    value: str | None = None,
    user_name: str = "",
) -> dict[str, Any]:
    """The ``block_actions`` payload of ``user_id`` pressing ``action_id`` on ``message``."""
    block_id, button = find_button(message.blocks, action_id)
    name = user_name or user_id.lower()
    action = {
        "type": "button",
        "action_id": action_id,
        "block_id": block_id,
        "text": button["text"],
        "value": button.get("value", "") if value is None else value,
        "action_ts": action_ts,
    }
    if "style" in button:
        action["style"] = button["style"]
    return {
        "type": "block_actions",
        "user": {"id": user_id, "username": name, "name": name, "team_id": TEAM["id"]},
        "api_app_id": "A0DOUBLE",
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": message.ts,
            "channel_id": message.channel,
            "is_ephemeral": False,
        },
        "trigger_id": f"trigger-{action_ts}",
        "team": TEAM,
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": message.channel, "name": "governor"},
        "message": {
            "type": "message",
            "ts": message.ts,
            "text": message.text,
            "blocks": message.blocks,
        },
        "state": {"values": {}},
        "response_url": "http://127.0.0.1/response-url-not-served",
        "actions": [action],
    }
