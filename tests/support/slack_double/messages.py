"""How a test reads the governor's approval messages in the double's store, and reaches it.

slack-sdk honours ``HTTPS_PROXY`` and ignores ``NO_PROXY``: a test whose governor (or whose
own client) talks to the double on loopback unsets the proxy variables first.
"""

from __future__ import annotations

import pytest

from tests.support.slack_double.server import SlackDouble
from tests.support.slack_double.store import Message

CHANNEL = "C0GOVERNOR"
PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


def unset_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset every proxy variable for this test (and the processes it starts)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def top_messages(double: SlackDouble, channel: str = CHANNEL) -> list[Message]:
    """The channel's messages that are not thread replies: one per proposal."""
    return [m for m in double.store.in_channel(channel) if m.thread_ts is None]


def header(message: Message) -> str:
    """The first block's text: what the message says the proposal's state is."""
    return str(message.blocks[0]["text"]["text"])


def has_buttons(message: Message) -> bool:
    """Whether the message still offers Approve/Reject buttons."""
    return any(block["type"] == "actions" for block in message.blocks)


def ephemerals_to(double: SlackDouble, user: str) -> list[str]:
    """The texts of the ephemeral answers shown to ``user``, oldest first."""
    return [e.text for e in double.store.ephemerals if e.user == user]
