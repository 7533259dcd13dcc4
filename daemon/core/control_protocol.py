"""The wire format of the control socket: one JSON object per line, each way.

A request is ``{"command": NAME, "args": {...}}``; the answer is ``{"ok": true, "result": ...}``
or ``{"ok": false, "error": MESSAGE}``. Requests and answers are small; a line longer than
:data:`MAX_LINE_BYTES` is refused rather than buffered without bound.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from daemon.core.errors import ControlError

MAX_LINE_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class ControlRequest:
    """A command for the running daemon."""

    command: str
    args: dict[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        """One line of JSON, newline included."""
        return json.dumps({"command": self.command, "args": self.args}).encode() + b"\n"

    @classmethod
    def decode(cls, line: bytes) -> ControlRequest:
        """Parse one request line.

        Raises:
            ControlError: the line is not a well-formed request.
        """
        document = _decode_object(line)
        command, args = document.get("command"), document.get("args", {})
        if not isinstance(command, str) or not isinstance(args, dict):
            message = "a request needs a string 'command' and an object 'args'"
            raise ControlError(message)
        return cls(command, args)


@dataclass(frozen=True, slots=True)
class ControlReply:
    """The daemon's answer to one request."""

    ok: bool
    result: Any = None
    error: str = ""

    def encode(self) -> bytes:
        """One line of JSON, newline included."""
        body = (
            {"ok": True, "result": self.result} if self.ok else {"ok": False, "error": self.error}
        )
        return json.dumps(body, default=str).encode() + b"\n"

    @classmethod
    def decode(cls, line: bytes) -> ControlReply:
        """Parse one reply line.

        Raises:
            ControlError: the line is not a well-formed reply.
        """
        document = _decode_object(line)
        ok = document.get("ok")
        if not isinstance(ok, bool):
            message = "a reply needs a boolean 'ok'"
            raise ControlError(message)
        return cls(ok, document.get("result"), str(document.get("error", "")))


def _decode_object(line: bytes) -> dict[str, Any]:
    try:
        document = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        message = f"not a JSON line: {exc}"
        raise ControlError(message) from exc
    if not isinstance(document, dict):
        message = "a control message must be a JSON object"
        raise ControlError(message)
    return document
