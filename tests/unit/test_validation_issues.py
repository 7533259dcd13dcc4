"""Pydantic's complaints in the governor's words: one table, every file format alike."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from daemon.core.validation_issues import allowed_keys, unknown_name, validation_issues


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Inner(_Model):
    colour: Literal["red", "blue"] = "red"
    size: Annotated[int, Field(ge=1, le=10)] = 1


class Root(_Model):
    name: Annotated[str, Field(pattern=r"^[a-z]+$")]
    every: str | int | float = Field(default="1s", alias="for")
    count: int = 0
    ratio: float = 1.0
    enabled: bool = False
    inner: Inner | None = None
    items: tuple[Inner, ...] = ()
    by_name: dict[str, Inner] = {}

    @field_validator("every")
    @classmethod
    def _is_duration(cls, value: str | int | float) -> str | int | float:
        if value == "soon":
            message = "'soon' is not a duration: write e.g. 30s"
            raise ValueError(message)
        return value


def _messages(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        Root.model_validate(data)
    issues = validation_issues(caught.value, model=Root, path=Path("f"), data=data, locations={})
    return [f"{issue.key_path}: {issue.message}" for issue in issues]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"name": "a", "count": "many"}, "count: expected a whole number (got 'many')"),
        ({"name": "a", "ratio": "high"}, "ratio: expected a number (got 'high')"),
        ({"name": "a", "enabled": "maybe"}, "enabled: expected true or false (got 'maybe')"),
        ({"name": "A"}, "name: must match the pattern ^[a-z]+$ (got 'A')"),
        ({"name": "a", "for": "soon"}, "for: 'soon' is not a duration: write e.g. 30s"),
        ({"name": "a", "for": [1]}, "for: expected a string, a whole number or a number"),
        ({"name": "a", "inner": 3}, "inner: expected a mapping of keys to values (got 3)"),
        (
            {"name": "a", "inner": {"colour": "green"}},
            "inner.colour: expected 'red' or 'blue' (got 'green')",
        ),
        ({"name": "a", "items": [{"size": 0}]}, "items.0.size: must be at least 1 (got 0)"),
        (
            {"name": "a", "by_name": {"x": {"size": 11}}},
            "by_name.x.size: must be at most 10 (got 11)",
        ),
        ({}, "name: required key is missing"),
        (
            {"name": "a", "fro": "1s"},
            "fro: unknown key (did you mean 'for'? allowed here: by_name, count, enabled, for, "
            "inner, items, name, ratio)",
        ),
        (
            {"name": "a", "inner": {"color": "red"}},
            "inner.color: unknown key (did you mean 'colour'? allowed here: colour, size)",
        ),
        (
            {"name": "a", "by_name": {"x": {"sise": 1}}},
            "by_name.x.sise: unknown key (did you mean 'size'? allowed here: colour, size)",
        ),
        (
            {"name": "a", "items": [{"zzz": 1}]},
            "items.0.zzz: unknown key (allowed here: colour, size)",
        ),
    ],
)
def test_each_complaint_is_one_sentence_in_our_words(data: dict[str, Any], expected: str) -> None:
    messages = _messages(data)
    assert messages == [expected]
    assert not any(
        phrase in message
        for message in messages
        for phrase in ("Input should", "Value error", "String should")
    )


def test_allowed_keys_follow_aliases_optionals_lists_and_tables() -> None:
    assert allowed_keys(Root, ())[:4] == ["by_name", "count", "enabled", "for"]
    assert allowed_keys(Root, ("inner",)) == ["colour", "size"]
    assert allowed_keys(Root, ("items", 0)) == ["colour", "size"]
    assert allowed_keys(Root, ("by_name", "x")) == ["colour", "size"]
    assert allowed_keys(Root, ("count",)) == []


def test_an_unknown_name_is_suggested_only_when_one_is_close() -> None:
    known = ["main", "backup"]
    assert unknown_name("target 'mian'", "mian", known, "targets") == (
        "unknown target 'mian' (did you mean 'main'? targets: backup, main)"
    )
    assert unknown_name("target 'zzz'", "zzz", known, "targets") == (
        "unknown target 'zzz' (targets: backup, main)"
    )
    assert unknown_name("key", "zzz", [], "allowed here") == "unknown key"
