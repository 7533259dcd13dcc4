"""Pydantic's complaints about a file, in the governor's own words and located in the file.

``config.toml``, policy files and policy test files are validated by pydantic models; this is
the one place where each complaint of pydantic becomes a :class:`ConfigIssue`, so that every file
speaks alike::

    cooldwn: unknown key (did you mean 'cooldown'? allowed here: action, budget_per_hour, ...)
    budget_per_hour: expected a whole number (got 'many')
    action.risk: expected 'auto' or 'approval' (got 'later')
    for: '2 minutes' is not a duration: write e.g. 30s, 2m, 1h30m or 1d

One issue per key path of the document: pydantic names a union's members in its locations
(``for.str``, ``for.int``) and complains once per member; those complaints become one. Nothing
of pydantic's own phrasing ("Input should be", "Value error, ") reaches a user.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from daemon.core.errors import ConfigIssue
from daemon.core.toml_locations import KeyPath, Location, nearest_location

Hint = Callable[[KeyPath], str | None]  # a file format's own advice for a key path, if any

# Type errors, by pydantic's error type: what was expected, in words.
_EXPECTED = {
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "string_type": "a string",
    "dict_type": "a mapping of keys to values",
    "model_type": "a mapping of keys to values",
    "model_attributes_type": "a mapping of keys to values",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "datetime_type": "a date and time such as 2026-11-30T12:00:00Z",
    "datetime_parsing": "a date and time such as 2026-11-30T12:00:00Z",
    "datetime_from_date_parsing": "a date and time such as 2026-11-30T12:00:00Z",
    "timezone_aware": "a time zone (2026-11-30T12:00:00Z, or +01:00)",
    "path_type": "a path",
}
# Bounds, by error type: a sentence of the bound in the error's context.
_BOUNDS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "greater_than": lambda ctx: f"must be above {ctx['gt']}",
    "greater_than_equal": lambda ctx: f"must be at least {ctx['ge']}",
    "less_than": lambda ctx: f"must be below {ctx['lt']}",
    "less_than_equal": lambda ctx: f"must be at most {ctx['le']}",
    "string_too_short": lambda ctx: (
        "must not be empty"
        if ctx["min_length"] == 1
        else f"must be at least {ctx['min_length']} characters long"
    ),
    "string_too_long": lambda ctx: f"must be at most {ctx['max_length']} characters long",
    "too_short": lambda ctx: f"needs at least {ctx['min_length']} item(s)",
    "too_long": lambda ctx: f"takes at most {ctx['max_length']} item(s)",
    "string_pattern_mismatch": lambda ctx: f"must match the pattern {ctx['pattern']}",
}
_PYDANTIC_PREFIXES = ("Value error, ", "Assertion failed, ")


def validation_issues(
    exc: ValidationError,
    *,
    model: type[BaseModel],
    path: Path,
    data: Any,
    locations: Mapping[KeyPath, Location],
    hint: Hint | None = None,
) -> list[ConfigIssue]:
    """Every problem pydantic found in ``data`` (read from ``path``), one issue per key path.

    ``model`` is the document's root model (for the keys allowed where one is unknown),
    ``locations`` where each key path is written; ``hint`` may replace the message of a value
    refused at a key path with a file format's own advice.
    """
    errors = exc.errors(include_url=False)
    parents = {tuple(e["loc"][:length]) for e in errors for length in range(len(e["loc"]))}
    grouped: dict[KeyPath, list[Mapping[str, Any]]] = {}
    for error in errors:
        if error["type"] == "too_short" and tuple(error["loc"]) in parents:
            continue  # pydantic also counts a list whose items failed as too short: noise
        where = data_path(data, tuple(error["loc"]), missing=error["type"] == "missing")
        grouped.setdefault(where, []).append(error)
    issues = []
    for where, complaints in grouped.items():
        message = _message(model, where, complaints, hint)
        location = nearest_location(dict(locations), where)
        key_path = ".".join(str(part) for part in where)
        issues.append(ConfigIssue(path, location.line, location.column, key_path, message))
    return sorted(issues, key=lambda issue: (issue.line, issue.column))


def data_path(data: Any, loc: tuple[Any, ...], *, missing: bool = False) -> KeyPath:
    """The part of pydantic's ``loc`` that names keys of the document.

    Pydantic adds the names of a union's members (``str``, ``int``) and of validators to its
    locations; those are not keys of the document. A missing key is kept: it names what to add.
    """
    found: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_list or (isinstance(node, dict) and part in node):
            node = node[part]
        elif not (isinstance(node, dict) and missing and index == len(loc) - 1):
            break  # a union member's name, or below a value: not a key of the document
        found.append(part)
    return tuple(found)


def closest(name: str, known: Collection[str]) -> str | None:
    """The known name ``name`` is most likely a typo of, if one is close enough."""
    matches = difflib.get_close_matches(name, sorted(known), n=1)
    return matches[0] if matches else None


def unknown_name(what: str, name: str, known: Collection[str], listed_as: str) -> str:
    """``unknown WHAT (did you mean 'x'? LISTED_AS: a, b, c)``, the suggestion when one is close.

    ``listed_as`` introduces the list of known names ("allowed here", "known", ...).
    """
    guess = closest(name, known)
    parts = [f"did you mean {guess!r}?"] if guess else []
    if known:
        parts.append(f"{listed_as}: {', '.join(sorted(known))}")
    return f"unknown {what} ({' '.join(parts)})" if parts else f"unknown {what}"


def allowed_keys(model: type[BaseModel], parent: KeyPath) -> list[str]:
    """The keys ``model`` accepts under ``parent`` (aliases as written), or [] when unknown."""
    current: Any = model
    entry_expected = False  # the previous part was a table of entries (by name or index)
    for part in parent:
        if entry_expected:
            entry_expected = False
            continue
        fields = _fields(current)
        field = fields.get(part) if isinstance(part, str) else None
        if field is None:
            return []
        current = _unwrapped(field.annotation)
        if typing.get_origin(current) in (dict, Mapping):
            current = _unwrapped(typing.get_args(current)[1])
            entry_expected = True
        elif typing.get_origin(current) in (tuple, list):
            current = _unwrapped(typing.get_args(current)[0])
            entry_expected = True  # the next part is the entry's index
    return [] if entry_expected else sorted(_fields(current))


def _fields(model: Any) -> dict[str, Any]:
    """A model's fields by the name a file writes them with (its alias, where it has one)."""
    fields = getattr(model, "model_fields", None)
    if not isinstance(fields, dict):
        return {}
    return {field.alias or name: field for name, field in fields.items()}


def _unwrapped(annotation: Any) -> Any:
    """``X | None`` (and ``Annotated[X, ...]``) as ``X``, when X is the only real choice."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        models = [a for a in members if isinstance(a, type) and issubclass(a, BaseModel)]
        if len(models) == 1:
            return models[0]
        if len(members) == 1:
            return _unwrapped(members[0])
    return annotation


def _message(
    model: type[BaseModel], where: KeyPath, errors: list[Mapping[str, Any]], hint: Hint | None
) -> str:
    kinds = {error["type"] for error in errors}
    if "extra_forbidden" in kinds:
        allowed = allowed_keys(model, where[:-1])
        return unknown_name("key", str(where[-1]), allowed, "allowed here")
    if "missing" in kinds:
        return "required key is missing"
    if hint is not None and (advice := hint(where)):
        return advice
    sentences = list(dict.fromkeys(_sentence(error) for error in errors))
    expected = [s.removeprefix("expected ") for s in sentences if s.startswith("expected ")]
    if len(sentences) > 1 and len(expected) == len(sentences):
        sentence = "expected " + ", ".join(expected[:-1]) + " or " + expected[-1]
    else:
        sentence = "; ".join(sentences)
    return sentence + _got(errors[0], sentence)


def _sentence(error: Mapping[str, Any]) -> str:
    """One complaint in words: what was expected, which bound was crossed, or the validator's."""
    kind = error["type"]
    context = error.get("ctx") or {}
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}"
    if kind in ("literal_error", "enum") and "expected" in context:
        return f"expected {context['expected']}"
    if kind in _BOUNDS:
        return _BOUNDS[kind](context)
    if kind in ("value_error", "assertion_error") and "error" in context:
        return str(context["error"])
    message = str(error["msg"])
    for prefix in _PYDANTIC_PREFIXES:
        message = message.removeprefix(prefix)
    if message.startswith("Input should be "):
        message = "expected " + message.removeprefix("Input should be ")
    return message


def _got(error: Mapping[str, Any], sentence: str) -> str:
    """`` (got X)`` for a scalar the sentence does not already quote."""
    if "input" not in error or isinstance(error["input"], dict | list | tuple):
        return ""
    value = error["input"]
    quoted = repr(value) in sentence or (
        isinstance(value, str) and len(value) > 2 and value in sentence
    )
    return "" if quoted else f" (got {value!r})"
