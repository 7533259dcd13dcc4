"""Load ``config.toml`` into a validated :class:`GovernorConfig`, or say exactly what is wrong.

Every problem becomes a :class:`ConfigIssue` with file, line, column and key path; all of
them are reported at once so that a user fixes a file in one pass.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from daemon.core.errors import ConfigError, ConfigIssue
from daemon.core.secrets import SECRET_FIELDS, secret_hint
from daemon.core.settings import GovernorConfig
from daemon.core.toml_locations import locate_keys, nearest_location
from daemon.core.validation_issues import validation_issues

_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
_TOML_END = re.compile(r"\(at end of document\)")


def load_config(path: Path) -> GovernorConfig:
    """Read and validate the configuration file at ``path``.

    Raises:
        ConfigError: the file is unreadable, not TOML, or not a valid configuration.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigIssue(path, 0, 0, "", f"cannot read the file: {exc}")]) from exc
    return parse_config(text, path)


def parse_config(text: str, path: Path) -> GovernorConfig:
    """Validate configuration ``text`` read from ``path`` (used in messages only)."""
    document = _parse_toml(text, path)
    locations = locate_keys(text)
    issues = _secret_issues(document, path, locations)
    try:
        # Strict JSON-mode validation: TOML already has types, so "9877" for a port or "yes"
        # for a boolean is a mistake to report, not something to coerce silently.
        config = GovernorConfig.model_validate_json(json.dumps(document, default=str), strict=True)
    except ValidationError as exc:
        issues.extend(
            validation_issues(
                exc, model=GovernorConfig, path=path, data=document, locations=locations
            )
        )
    if issues:
        raise ConfigError(sorted(issues, key=lambda issue: (issue.line, issue.column)))
    return config


def _parse_toml(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        line, column = 0, 0
        if match := _TOML_POSITION.search(message):
            line, column = int(match.group(1)), int(match.group(2))
        elif _TOML_END.search(message):
            line, column = text.count("\n") + 1, 1
        reason = _TOML_POSITION.sub("", _TOML_END.sub("", message)).strip()
        issue = ConfigIssue(path, line, column, "", f"TOML syntax error: {reason}")
        raise ConfigError([issue]) from exc


def _secret_issues(document: dict[str, Any], path: Path, locations: Any) -> list[ConfigIssue]:
    """Secrets written into the file are an error of their own, with a hint where they go."""
    slack = document.get("slack")
    if not isinstance(slack, dict):
        return []
    issues = []
    for key in list(slack):
        field = f"slack_{key}"
        if field in SECRET_FIELDS:
            del slack[key]  # reported here; pydantic need not call it an unknown key too
            where = nearest_location(locations, ("slack", key))
            message = f"secrets are never read from the config file: {secret_hint(field)}"
            issues.append(ConfigIssue(path, where.line, where.column, f"slack.{key}", message))
    return issues
