"""Where something is written in a test file, and pydantic's errors turned into located issues."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from daemon.core.errors import ConfigIssue
from daemon.core.toml_locations import KeyPath, nearest_location
from daemon.core.validation_issues import validation_issues as core_validation_issues
from daemon.core.yaml_documents import LocatedDocument
from daemon.policy.testing.models import PolicyTestsModel

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
    """One issue per key path pydantic complains about, in the governor's words."""
    return core_validation_issues(
        exc,
        model=PolicyTestsModel,
        path=document.path,
        data=document.data,
        locations=document.locations,
        hint=_series_hint,
    )


def _series_hint(where: KeyPath) -> str | None:
    """A refused value in a series: most often a number YAML read from an unquoted series."""
    if len(where) >= 5 and where[0] == "tests" and where[2] == "series":
        return _SERIES_HINT
    return None
