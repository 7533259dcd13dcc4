"""Find where a key path is written in a TOML document.

``tomllib`` reports syntax errors with a line and column but forgets positions once a document
is parsed, and pydantic reports validation errors by key path only. This module scans the text
once and maps every key path it can see to its line and column, so that a validation error can
say ``config.toml:12:1: slack.channel: ...``.

It understands what configuration files use: ``[tables]``, ``[[arrays.of.tables]]`` (paths get
the element index), ``key = value`` with bare, quoted and dotted keys, comments, multi-line
strings and multi-line arrays. Keys inside inline tables are located at their parent key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KeyPath = tuple[str | int, ...]

_BARE_KEY = r"[A-Za-z0-9_-]+"
_QUOTED_KEY = r"\"(?:[^\"\\]|\\.)*\"|'[^']*'"
_KEY_PART = rf"(?:{_BARE_KEY}|{_QUOTED_KEY})"
_DOTTED_KEY = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_TABLE_HEADER = re.compile(rf"^\s*\[\s*({_DOTTED_KEY})\s*\]")
_ARRAY_HEADER = re.compile(rf"^\s*\[\[\s*({_DOTTED_KEY})\s*\]\]")
_ASSIGNMENT = re.compile(rf"^(\s*)({_DOTTED_KEY})\s*=")
_KEY_PART_RE = re.compile(_KEY_PART)


@dataclass(frozen=True, slots=True)
class Location:
    """A 1-based line and column in a text file."""

    line: int
    column: int


def _split_key(dotted: str) -> tuple[str, ...]:
    parts = []
    for match in _KEY_PART_RE.finditer(dotted):
        part = match.group(0)
        if part[0] in "\"'":
            part = part[1:-1]
        parts.append(part)
    return tuple(parts)


def _strip_comment(line: str) -> str:
    """Drop a trailing comment, leaving ``#`` inside strings alone."""
    quote: str | None = None
    escaped = False
    for index, char in enumerate(line):
        if quote == '"' and escaped:
            escaped = False
        elif quote == '"' and char == "\\":
            escaped = True
        elif quote is not None and char == quote:
            quote = None
        elif quote is None and char in "\"'":
            quote = char
        elif quote is None and char == "#":
            return line[:index]
    return line


def _bracket_balance(text: str) -> int:
    """Net count of ``[``/``{`` over ``]``/``}`` outside strings."""
    balance = 0
    quote: str | None = None
    escaped = False
    for char in text:
        if quote == '"' and escaped:
            escaped = False
        elif quote == '"' and char == "\\":
            escaped = True
        elif quote is not None and char == quote:
            quote = None
        elif quote is None and char in "\"'":
            quote = char
        elif quote is None and char in "[{":
            balance += 1
        elif quote is None and char in "]}":
            balance -= 1
    return balance


def _open_multiline_after(text: str, open_marker: str | None) -> str | None:
    """Which multi-line string (``\"\"\"`` or ``'''``) is still open at the end of ``text``."""
    index = 0
    while index < len(text):
        if open_marker is not None:
            end = text.find(open_marker, index)
            if end < 0:
                return open_marker
            index, open_marker = end + 3, None
        elif text.startswith(('"""', "'''"), index):
            open_marker = text[index : index + 3]
            index += 3
        elif text[index] == '"':
            index += 1
            while index < len(text) and text[index] != '"':
                index += 2 if text[index] == "\\" else 1
            index += 1
        elif text[index] == "'":
            end = text.find("'", index + 1)
            index = end + 1 if end >= 0 else len(text)
        elif text[index] == "#":
            return None
        else:
            index += 1
    return open_marker


def locate_keys(text: str) -> dict[KeyPath, Location]:
    """Map each key path written in ``text`` to where it is written.

    Tables map to their header line; keys to their own line. Elements of arrays of tables
    contribute an integer index to the path, as pydantic's error locations do.
    """
    locations: dict[KeyPath, Location] = {}
    array_counts: dict[KeyPath, int] = {}
    current: KeyPath = ()
    open_multiline: str | None = None
    continuation_depth = 0
    for number, raw_line in enumerate(text.splitlines(), start=1):
        if open_multiline is not None:
            open_multiline = _open_multiline_after(raw_line, open_multiline)
            continue
        line = _strip_comment(raw_line)
        if continuation_depth > 0:
            continuation_depth += _bracket_balance(line)
            continue
        if match := _ARRAY_HEADER.match(line):
            table = _split_key(match.group(1))
            index = array_counts.get(table, 0)
            array_counts[table] = index + 1
            locations.setdefault(table, Location(number, match.start(1) + 1))
            current = (*table, index)
            locations[current] = Location(number, match.start(1) + 1)
        elif match := _TABLE_HEADER.match(line):
            current = _split_key(match.group(1))
            locations[current] = Location(number, match.start(1) + 1)
        elif match := _ASSIGNMENT.match(line):
            key = _split_key(match.group(2))
            for depth in range(1, len(key) + 1):
                locations.setdefault(
                    (*current, *key[:depth]), Location(number, len(match.group(1)) + 1)
                )
            value = raw_line[match.end() :]
            open_multiline = _open_multiline_after(value, None)
            if open_multiline is None:
                continuation_depth = max(_bracket_balance(value), 0)
    return locations


def nearest_location(locations: dict[KeyPath, Location], path: KeyPath) -> Location:
    """The location of ``path``, or of its closest written ancestor, or the file's start."""
    for length in range(len(path), 0, -1):
        found = locations.get(tuple(path[:length]))
        if found is not None:
            return found
    return Location(1, 1)
