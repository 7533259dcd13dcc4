"""A wire-level Slack double for tests: Web API subset, Socket Mode, signed interactivity."""

from __future__ import annotations

from tests.support.slack_double.faults import Drop, RateLimited, ServerError, Slow
from tests.support.slack_double.interactivity import SignedRequest, post, signed_request
from tests.support.slack_double.payloads import block_actions, find_button
from tests.support.slack_double.server import APP_TOKEN, BOT_TOKEN, SlackDouble
from tests.support.slack_double.socket_mode import ACK_DEADLINE_S, Envelope
from tests.support.slack_double.store import Call, Message

__all__ = [
    "ACK_DEADLINE_S",
    "APP_TOKEN",
    "BOT_TOKEN",
    "Call",
    "Drop",
    "Envelope",
    "Message",
    "RateLimited",
    "ServerError",
    "SignedRequest",
    "SlackDouble",
    "Slow",
    "block_actions",
    "find_button",
    "post",
    "signed_request",
]
