"""What of a misshapen policy document is right: the rest, once the refused keys are set aside.

``check`` reports every problem of a file at once. When pydantic refuses the shape of a file,
its expressions, targets and knobs must still be compiled and checked; this module finds the
part of the document that validates: each key pydantic refused is set aside (removed, so that
it takes its default; a missing required key gets a stand-in) until the rest validates.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from daemon.core.toml_locations import KeyPath
from daemon.core.validation_issues import data_path
from daemon.policy.spec import PolicyModel

# Stand-ins for required keys that are missing, so that the rest of a file can still be checked.
_STAND_INS = {"name": "unnamed", "when": "true"}
_ROUNDS = 8  # each round sets aside at least one key; policy files are small


@dataclass(frozen=True, slots=True)
class ValidPart:
    """The model of what validates, and the key paths set aside to get it."""

    model: PolicyModel
    aside: tuple[KeyPath, ...]

    def near_aside(self, key_path: str) -> bool:
        """Whether dotted ``key_path`` is a key set aside, inside one, or around one."""
        parts = tuple(key_path.split(".")) if key_path else ()
        for where in self.aside:
            other = tuple(str(part) for part in where)
            shorter = min(len(parts), len(other))
            if parts[:shorter] == other[:shorter]:
                return True
        return False


def valid_part(data: dict[str, Any]) -> ValidPart | None:
    """The part of ``data`` that validates, or None when nothing can be set aside any more."""
    rest = copy.deepcopy(data)
    aside: list[KeyPath] = []
    for _ in range(_ROUNDS):
        try:
            return ValidPart(PolicyModel.model_validate(rest), tuple(aside))
        except ValidationError as exc:
            refused = [_set_aside(rest, tuple(error["loc"])) for error in exc.errors()]
        if not any(refused):
            return None
        aside += [where for where in refused if where is not None]
    return None


def _set_aside(data: dict[str, Any], loc: tuple[Any, ...]) -> KeyPath | None:
    """Remove what ``loc`` refuses from ``data``; the key path removed, or None when none was.

    A list is set aside whole (removing one item would move the others' indexes, and their
    problems would be reported at the wrong item).
    """
    where = data_path(data, loc, missing=True)
    if len(where) == 1 and where[0] in _STAND_INS and where[0] not in data:
        data[str(where[0])] = _STAND_INS[str(where[0])]
        return where
    node: Any = data
    for depth, part in enumerate(where):
        if isinstance(node, list) or not isinstance(node, dict) or part not in node:
            where = where[:depth]
            break
        node = node[part]
    if not where:
        return None
    parent: Any = data
    for part in where[:-1]:
        parent = parent[part]
    del parent[where[-1]]
    return where
