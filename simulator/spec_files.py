"""Read the simulator's YAML input files and validate them, with every problem located.

Profiles and workload specs are pydantic models with ``extra="forbid"``; a problem is
reported as ``file:line:col: key.path: message``, all of them at once, so that a typo in a
hand-written file is found in one pass. Only PyYAML's safe loader is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from simulator.errors import SpecError, SpecIssue

KeyPath = tuple[str | int, ...]
Model = TypeVar("Model", bound=BaseModel)


def load_mapping(path: Path) -> tuple[dict[str, Any], dict[KeyPath, tuple[int, int]]]:
    """Load a YAML file whose top level is a mapping, with the position of every key.

    Returns:
        The document, and (line, column) of each key path, both 1-based.

    Raises:
        SpecError: unreadable file, YAML syntax error, or a top level that is not a mapping.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([SpecIssue(path, 0, 0, "", f"cannot read the file: {exc}")]) from exc
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        document = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        problem = exc.problem or exc.context or "invalid YAML"
        raise SpecError(
            [SpecIssue(path, line, column, "", f"YAML syntax error: {problem}")]
        ) from exc
    except yaml.YAMLError as exc:
        raise SpecError([SpecIssue(path, 0, 0, "", f"YAML error: {exc}")]) from exc
    if not isinstance(document, dict):
        kind = "empty" if document is None else type(document).__name__
        raise SpecError([SpecIssue(path, 1, 1, "", f"the top level must be a mapping, not {kind}")])
    locations: dict[KeyPath, tuple[int, int]] = {}
    _collect_locations(node, (), locations)
    return document, locations


def validate(
    model: type[Model],
    document: dict[str, Any],
    path: Path,
    locations: dict[KeyPath, tuple[int, int]],
) -> Model:
    """Validate ``document`` against ``model``; every problem becomes a located issue.

    Raises:
        SpecError: one issue per validation error, sorted by position in the file.
    """
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        issues = []
        for error in exc.errors(include_url=False):
            loc: KeyPath = tuple(error["loc"])
            line, column = nearest_location(locations, loc)
            key = ".".join(str(part) for part in loc)
            issues.append(SpecIssue(path, line, column, key, _message(model, error)))
        raise SpecError(sorted(issues, key=lambda issue: (issue.line, issue.column))) from exc


def nearest_location(locations: dict[KeyPath, tuple[int, int]], loc: KeyPath) -> tuple[int, int]:
    """The position of ``loc``, or of its nearest ancestor that the file spells out."""
    for end in range(len(loc), 0, -1):
        if loc[:end] in locations:
            return locations[loc[:end]]
    return (1, 1)


def _collect_locations(
    node: yaml.Node | None, prefix: KeyPath, out: dict[KeyPath, tuple[int, int]]
) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key_path = (*prefix, str(key_node.value))
            out[key_path] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            _collect_locations(value_node, key_path, out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            key_path = (*prefix, index)
            out[key_path] = (item.start_mark.line + 1, item.start_mark.column + 1)
            _collect_locations(item, key_path, out)


def _message(model: type[BaseModel], error: Any) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        allowed = _allowed_keys(model, tuple(error["loc"][:-1]))
        return f"unknown key (allowed here: {', '.join(allowed)})" if allowed else "unknown key"
    if kind == "missing":
        return "required key is missing"
    message = str(error["msg"])
    if "input" in error and not isinstance(error["input"], dict | list):
        message += f" (got {error['input']!r})"
    return message


def _allowed_keys(model: type[BaseModel], parent: KeyPath) -> list[str]:
    """The keys the schema accepts under ``parent``, or [] when it cannot tell."""
    current: Any = model
    for part in parent:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        current = field.annotation
        # A list of models (``bursts: list[Burst]``) accepts the keys of its item model.
        args = getattr(current, "__args__", ())
        if args and hasattr(args[0], "model_fields"):
            current = args[0]
    return sorted(getattr(current, "model_fields", {}))
