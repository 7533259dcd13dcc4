"""Read YAML documents safely, with errors located by file, line and column.

Only PyYAML's safe loader is used: a YAML file can never construct Python objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from daemon.core.errors import ConfigError, ConfigIssue


def load_yaml_mapping(path: Path) -> dict[str, Any]:
    """Load a YAML file whose top level must be a mapping.

    Raises:
        ConfigError: unreadable file, YAML syntax error (with its position), or not a mapping.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigIssue(path, 0, 0, "", f"cannot read the file: {exc}")]) from exc
    try:
        document = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        problem = exc.problem or exc.context or "invalid YAML"
        issue = ConfigIssue(path, line, column, "", f"YAML syntax error: {problem}")
        raise ConfigError([issue]) from exc
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigIssue(path, 0, 0, "", f"YAML error: {exc}")]) from exc
    if not isinstance(document, dict):
        kind = "empty" if document is None else type(document).__name__
        issue = ConfigIssue(path, 1, 1, "", f"the top level must be a mapping, not {kind}")
        raise ConfigError([issue])
    return document
