"""Where something is written in a test file, and pydantic's errors turned into located issues."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from daemon.core.errors import ConfigIssue
from daemon.core.toml_locations import KeyPath, nearest_location
from daemon.core.yaml_documents import LocatedDocument

_TYPE_PREFIX = "Input should be "
_SERIES_HINT = (
    'a series is a quoted string such as "0.5x30" (unquoted, YAML reads 0x10 as the number 16)'
)


@dataclass(frozen=True, slots=True)
class Place:
    """A key path of a test file and where it is written."""

    path: Path
    line: int
    column: int
    key_path: str

    def issue(self, message: str) -> ConfigIssue:
        """A problem at this place."""
        return ConfigIssue(self.path, self.line, self.column, self.key_path, message)


def place_of(document: LocatedDocument, where: KeyPath) -> Place:
    """The place of ``where`` (or of its closest written ancestor)."""
    location = nearest_location(document.locations, where)
    key_path = ".".join(str(part) for part in where)
    return Place(document.path, location.line, location.column, key_path)


def validation_issues(exc: ValidationError, document: LocatedDocument) -> list[ConfigIssue]:
    """One issue per key path pydantic complains about; a union's complaints become one."""
    grouped: dict[KeyPath, list[dict[str, Any]]] = {}
    errors = exc.errors(include_url=False)
    parents = {tuple(e["loc"][:length]) for e in errors for length in range(len(e["loc"]))}
    for error in errors:
        if error["type"] == "too_short" and tuple(error["loc"]) in parents:
            continue  # pydantic also counts a list whose items failed as too short: noise
        where = _data_path(document.data, tuple(error["loc"]), error["type"] == "missing")
        grouped.setdefault(where, []).append(dict(error))
    issues = [
        place_of(document, where).issue(_message(where, errors))
        for where, errors in grouped.items()
    ]
    return sorted(issues, key=lambda issue: (issue.line, issue.column))


def _data_path(data: Any, loc: tuple[Any, ...], missing: bool) -> KeyPath:
    """The part of ``loc`` that names keys of the document; pydantic adds union member names."""
    path: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_list or (isinstance(node, dict) and part in node):
            node = node[part]
        elif not (isinstance(node, dict) and missing and index == len(loc) - 1):
            break  # a union member's name, or below a value: not a key of the document
        path.append(part)
    return tuple(path)


def _message(where: KeyPath, errors: list[dict[str, Any]]) -> str:
    kinds = {error["type"] for error in errors}
    if "extra_forbidden" in kinds:
        return "unknown key"
    if "missing" in kinds:
        return "required key is missing"
    if len(where) >= 5 and where[0] == "tests" and where[2] == "series":
        return _SERIES_HINT
    messages = list(dict.fromkeys(str(error["msg"]) for error in errors))
    if len(messages) > 1 and all(m.startswith(_TYPE_PREFIX) for m in messages):
        options = [m.removeprefix(_TYPE_PREFIX) for m in messages]
        return _TYPE_PREFIX + ", ".join(options[:-1]) + " or " + options[-1]
    return "; ".join(messages)
