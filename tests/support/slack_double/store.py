"""What the Slack double remembers: every Web API call, and the messages as they stand."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Call:
    """One Web API call as the double received it.

    Attributes:
        method: ``chat.postMessage`` and so on.
        args: The arguments, merged from the query string and the form or JSON body (a
            ``blocks`` sent as a JSON string in a form is decoded).
        token: The token it carried (Bearer header, or ``token`` in a form), or None.
        content_type: The body's content type.
        at: The loop time it arrived.
        fault: The name of the scripted fault it suffered, or None.
        answer: The JSON answer (None when the connection was dropped).
    """

    method: str
    args: dict[str, Any]
    token: str | None
    content_type: str
    at: float
    fault: str | None
    answer: dict[str, Any] | None


@dataclass(slots=True)
class Message:
    """A message as it stands in a channel; ``edits`` keeps the earlier versions."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None
    metadata: dict[str, Any] | None = None
    edits: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Ephemeral:
    """A message only one user sees."""

    channel: str
    user: str
    text: str
    blocks: list[dict[str, Any]]
    message_ts: str


class MessageStore:
    """Messages by (channel, ts), with timestamps that only grow, like Slack's."""

    def __init__(self) -> None:
        self.messages: dict[tuple[str, str], Message] = {}
        self.ephemerals: list[Ephemeral] = []
        self.groups: dict[str, set[str]] = {}  # user-group id -> member user ids
        self._serial = itertools.count(1)

    def next_ts(self) -> str:
        """A fresh message timestamp (``1700000000.000001`` and up)."""
        return f"1700000000.{next(self._serial):06d}"

    def in_channel(self, channel: str) -> list[Message]:
        """The channel's messages, oldest first (thread replies included)."""
        return [m for (c, _), m in sorted(self.messages.items()) if c == channel]

    def replies(self, channel: str, thread_ts: str) -> list[Message]:
        """The replies in a thread, oldest first."""
        return [m for m in self.in_channel(channel) if m.thread_ts == thread_ts]
