"""The wire format of the control socket: one JSON object per line, each way.

A request is ``{"command": NAME, "args": {...}}``; the answer is ``{"ok": true, "result": ...}``
or ``{"ok": false, "error": MESSAGE}``. Nothing is buffered or parsed without bound: a request
is at most :data:`MAX_REQUEST_BYTES` on one line, nests at most :data:`MAX_NESTING` arrays and
objects (deeper ones would exhaust the parser's recursion), and its numbers are finite (JSON
has no ``Infinity`` or ``NaN``, and ``1e400`` would read as one). An answer, which may list a
lot of state, is at most :data:`MAX_LINE_BYTES`; a list that may be longer (every signal of a
store at its bounds) is answered a page at a time (:func:`page_of`): the request names the
``offset`` to start from, the answer the ``next_offset`` to ask for (null after the last page).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from daemon.core.errors import ControlError
from daemon.core.json_nesting import nests_deeper_than

MAX_LINE_BYTES = 1 << 20
MAX_REQUEST_BYTES = 1 << 16
MAX_NESTING = 16
TOO_LONG = f"a request is at most {MAX_REQUEST_BYTES} bytes on one line"
# The rows of one page: half an answer, the rest of the answer (sources, say) in the other half.
MAX_PAGE_BYTES = MAX_LINE_BYTES // 2


def page_of(
    rows: Sequence[object], offset: int, max_bytes: int = MAX_PAGE_BYTES
) -> tuple[list[object], int | None]:
    """The rows from ``offset`` that fit in ``max_bytes`` of JSON, and where the next page starts.

    A page holds at least one row (a row alone larger than a page is still sent), so asking
    for ``next_offset`` until it is None always ends. Rows are counted as :class:`ControlReply`
    encodes them.
    """
    page: list[object] = []
    size = 0
    for index in range(offset, len(rows)):
        size += len(json.dumps(rows[index], default=str)) + 2  # the separator
        if page and size > max_bytes:
            return page, index
        page.append(rows[index])
    return page, None


def offset_of(args: dict[str, object]) -> int:
    """The ``offset`` a paged request asks for (0 when absent).

    Raises:
        ControlError: it is not a whole number of at least 0.
    """
    offset = args.get("offset", 0)
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        message = "'offset' must be a whole number of at least 0"
        raise ControlError(message)
    return offset


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
        if len(line) > MAX_REQUEST_BYTES:
            raise ControlError(TOO_LONG)
        document = _decode_object(line, strict=True)
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


class _NotFinite(ValueError):
    """A number JSON cannot hold (``Infinity``, ``NaN``) or a double cannot (``1e400``)."""


def _refuse_constant(text: str) -> float:
    raise _NotFinite(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


def _decode_object(line: bytes, *, strict: bool = False) -> dict[str, Any]:
    """One JSON object; ``strict`` (requests): bounded nesting and finite numbers only."""
    try:
        if not strict:
            document = json.loads(line)
        else:
            text = line.decode()
            if nests_deeper_than(text, MAX_NESTING):
                message = f"a request may nest at most {MAX_NESTING} levels of arrays and objects"
                raise ControlError(message)
            document = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except _NotFinite as exc:
        message = f"a request's numbers must be finite; not a finite number: {exc}"
        raise ControlError(message) from exc
    except (ValueError, RecursionError) as exc:  # a JSON error, bad UTF-8, an int too long
        message = f"not a JSON line: {exc}"
        raise ControlError(message) from exc
    if not isinstance(document, dict):
        message = "a control message must be a JSON object"
        raise ControlError(message)
    return document
