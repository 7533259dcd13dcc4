"""Reading and validating a batch input file: the OpenAI batch input format, checked whole.

One JSON object per line: ``{"custom_id": ..., "method": "POST", "url": ..., "body": {...}}``.
``custom_id`` is a non-empty string unique in the file (it is how a result is matched to its
request, and how a resumed job knows which lines are done); ``url`` is ``/v1/completions`` or
``/v1/chat/completions``; ``body`` is the request's JSON object, sent as is, and may not ask to
stream (a result is one JSON body). Keys other than these four are refused, so that a typo is
an error rather than a silently ignored field. Lines holding only white space are skipped.

A file is accepted whole or not at all: every problem found is reported as ``file:line: what
is wrong`` (the first :data:`MAX_PROBLEMS_SHOWN` of them), and nothing of a refused file runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.batch.errors import BatchFileError

URLS = ("/v1/completions", "/v1/chat/completions")
KEYS = frozenset({"custom_id", "method", "url", "body"})
MAX_PROBLEMS_SHOWN = 20
MAX_CUSTOM_ID_CHARS = 512


@dataclass(frozen=True, slots=True)
class BatchLine:
    """One request of a batch.

    Attributes:
        line_no: Its 1-based line in the input file.
        custom_id: The caller's name for it, unique in the file.
        url: The path it is sent to on the target's server.
        body: The request body, as compact JSON.
    """

    line_no: int
    custom_id: str
    url: str
    body: bytes


@dataclass(frozen=True, slots=True)
class BatchInput:
    """A validated input file: its lines and the SHA-256 of its bytes (to notice a change)."""

    path: Path
    lines: tuple[BatchLine, ...]
    sha256: str


def read_batch_file(path: Path, *, max_bytes: int, max_lines: int) -> BatchInput:
    """Read ``path`` and validate every line.

    Raises:
        BatchFileError: the file is unreadable, too large, or has invalid lines (all listed).
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise BatchFileError(path, [(0, f"cannot be read: {exc.strerror or exc}")]) from exc
    if len(data) > max_bytes:
        message = f"is larger than [batch] max_file_bytes ({max_bytes} bytes); split it"
        raise BatchFileError(path, [(0, message)])
    return parse_batch_bytes(path, data, max_lines=max_lines)


def parse_batch_bytes(path: Path, data: bytes, *, max_lines: int) -> BatchInput:
    """Validate the bytes of an input file (``path`` only names it in messages).

    Raises:
        BatchFileError: one or more lines are invalid, or there are none, or too many.
    """
    problems: list[tuple[int, str]] = []
    lines: list[BatchLine] = []
    seen: dict[str, int] = {}
    for line_no, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        parsed = _parse_line(raw)
        if isinstance(parsed, str):
            problems.append((line_no, parsed))
            continue
        custom_id, url, body = parsed
        if custom_id in seen:
            problems.append((line_no, f"custom_id {custom_id!r} repeats line {seen[custom_id]}"))
            continue
        seen[custom_id] = line_no
        lines.append(BatchLine(line_no, custom_id, url, body))
    if not lines and not problems:
        problems.append((0, "holds no request (one JSON object per line)"))
    if len(lines) + len(problems) > max_lines:
        problems.insert(0, (0, f"holds more than [batch] max_lines ({max_lines}) requests"))
    if problems:
        shown = problems[:MAX_PROBLEMS_SHOWN]
        if len(problems) > len(shown):
            shown.append((0, f"... and {len(problems) - len(shown)} more problem(s)"))
        raise BatchFileError(path, shown)
    return BatchInput(path, tuple(lines), hashlib.sha256(data).hexdigest())


def _parse_line(raw: bytes) -> tuple[str, str, bytes] | str:
    """The line's (custom_id, url, compact body), or what is wrong with it."""
    try:
        document = json.loads(raw, parse_constant=_no_constant)
    except UnicodeDecodeError:
        return "is not UTF-8"
    except (ValueError, RecursionError) as exc:
        return f"is not valid JSON ({_short(exc)})"
    if not isinstance(document, dict):
        return "must be a JSON object with custom_id, method, url and body"
    for check in _CHECKS:
        if problem := check(document):
            return problem
    body = json.dumps(document["body"], separators=(",", ":")).encode()
    return document["custom_id"], document["url"], body


def _known_keys(document: dict[str, Any]) -> str:
    unknown = sorted(set(document) - KEYS)
    if unknown:
        return f"unknown key(s) {', '.join(map(repr, unknown))} (known: {', '.join(sorted(KEYS))})"
    return ""


def _custom_id(document: dict[str, Any]) -> str:
    custom_id = document.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id.strip():
        return "custom_id must be a non-empty string"
    if len(custom_id) > MAX_CUSTOM_ID_CHARS:
        return f"custom_id is longer than {MAX_CUSTOM_ID_CHARS} characters"
    return ""


def _method(document: dict[str, Any]) -> str:
    method = document.get("method")
    return "" if method == "POST" else f'method must be "POST", not {method!r}'


def _url(document: dict[str, Any]) -> str:
    url = document.get("url")
    return "" if url in URLS else f"url must be one of {', '.join(URLS)}, not {url!r}"


def _body(document: dict[str, Any]) -> str:
    body = document.get("body")
    if not isinstance(body, dict):
        return "body must be a JSON object (the request sent to the server)"
    if body.get("stream", False) is not False:
        return "body.stream must be false or absent: a batch result is one JSON body"
    return ""


# Each check of a line's object, in the order its problems are worth reading.
_CHECKS: tuple[Callable[[dict[str, Any]], str], ...] = (
    _known_keys,
    _custom_id,
    _method,
    _url,
    _body,
)


def _no_constant(name: str) -> Any:
    # JSON has no NaN or Infinity: Python's parser takes them, the server's may not.
    message = f"{name} is not JSON"
    raise ValueError(message)


def _short(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    return str(exc)
