"""Slack's side of the HTTP interactivity transport: signed ``payload=`` form posts.

Slack posts ``application/x-www-form-urlencoded`` with one field, ``payload`` (the JSON), and
signs it: ``X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:<timestamp>:<body>">`` with the app's
signing secret, and ``X-Slack-Request-Timestamp`` in epoch seconds.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp


@dataclass(frozen=True, slots=True)
class SignedRequest:
    """A request body and its headers, ready to post (or to tamper with)."""

    body: bytes
    headers: dict[str, str]


def signature(signing_secret: str, timestamp: int, body: bytes) -> str:
    """Slack's ``v0`` signature of ``body`` at ``timestamp``."""
    base = b"v0:" + str(timestamp).encode() + b":" + body
    digest = hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()
    return f"v0={digest}"


def signed_request(payload: dict[str, Any], signing_secret: str, timestamp: int) -> SignedRequest:
    """The form-encoded, signed request carrying ``payload``."""
    body = urlencode({"payload": json.dumps(payload, separators=(",", ":"))}).encode()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": str(timestamp),
        "X-Slack-Signature": signature(signing_secret, timestamp, body),
    }
    return SignedRequest(body, headers)


async def post(url: str, request: SignedRequest, timeout_s: float = 10.0) -> tuple[int, str]:
    """Post ``request`` to ``url``; return the status and the body of the answer."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with (
        aiohttp.ClientSession(timeout=timeout, trust_env=False) as session,
        session.post(url, data=request.body, headers=request.headers) as answer,
    ):
        return answer.status, await answer.text()
