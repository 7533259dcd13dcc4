"""Read a YAML document safely and remember where every key path is written.

Policies are written by people and reviewed by people, so an error must point at the line.
The document is read with PyYAML's safe loader only (YAML can never build Python objects), and
guarded against the usual ways a small file becomes a large problem: a size cap, a nesting cap,
and no anchors or aliases (a "billion laughs" file expands aliases exponentially; policies have
no use for them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from daemon.core.errors import ConfigError, ConfigIssue
from daemon.core.toml_locations import KeyPath, Location

MAX_BYTES = 256 * 1024
MAX_DEPTH = 32


@dataclass(frozen=True, slots=True)
class LocatedDocument:
    """A parsed YAML mapping and the location of each key path in it."""

    path: Path
    data: dict[str, Any]
    locations: dict[KeyPath, Location]


def load_located_yaml(path: Path, *, max_bytes: int = MAX_BYTES) -> LocatedDocument:
    """Read ``path``: a YAML mapping with positions.

    Raises:
        ConfigError: unreadable, too large, not YAML, uses anchors, too deep, or not a mapping.
    """
    try:
        size = path.stat().st_size
        if size > max_bytes:
            message = f"the file is {size} bytes; policy files are limited to {max_bytes}"
            raise ConfigError([ConfigIssue(path, 0, 0, "", message)])
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigIssue(path, 0, 0, "", f"cannot read the file: {exc}")]) from exc
    return parse_located_yaml(text, path)


def parse_located_yaml(text: str, path: Path) -> LocatedDocument:
    """Parse ``text`` read from ``path`` (used in messages); one pass of the parser."""
    loader = _Loader(text)
    locations: dict[KeyPath, Location] = {}
    try:
        node = loader.get_single_node()
        if not isinstance(node, yaml.MappingNode):
            kind = "empty" if node is None else node.tag.rsplit(":", 1)[-1]
            issue = ConfigIssue(path, 1, 1, "", f"the top level must be a mapping, not {kind}")
            raise ConfigError([issue])
        # Locations first: the walk also refuses aliases and deep nesting before anything is
        # constructed (and so before an alias could be expanded).
        _walk(node, (), locations, path, depth=0, seen=set())
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        problem = exc.problem or exc.context or "invalid YAML"
        message = f"YAML syntax error: {problem}"
        raise ConfigError([ConfigIssue(path, line, column, "", message)]) from exc
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigIssue(path, 0, 0, "", f"YAML error: {exc}")]) from exc
    finally:
        loader.dispose()
    return LocatedDocument(path, data, locations)


# libyaml's C parser when PyYAML was built with it (the wheels are): same nodes and marks.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _walk(
    node: yaml.Node,
    prefix: KeyPath,
    out: dict[KeyPath, Location],
    path: Path,
    *,
    depth: int,
    seen: set[int],
) -> None:
    # An alias is the same node object met twice: refused before it can be expanded.
    if id(node) in seen and not isinstance(node, yaml.ScalarNode):
        mark = node.start_mark
        message = "anchors and aliases (&, *) are not allowed in policy files"
        raise ConfigError([ConfigIssue(path, mark.line + 1, mark.column + 1, "", message)])
    seen.add(id(node))
    if depth > MAX_DEPTH:
        mark = node.start_mark
        message = f"nested more than {MAX_DEPTH} levels deep"
        raise ConfigError([ConfigIssue(path, mark.line + 1, mark.column + 1, "", message)])
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else str(key.start_mark)
            here = (*prefix, name)
            out[here] = Location(key.start_mark.line + 1, key.start_mark.column + 1)
            _walk(value, here, out, path, depth=depth + 1, seen=seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            here = (*prefix, index)
            out[here] = Location(item.start_mark.line + 1, item.start_mark.column + 1)
            _walk(item, here, out, path, depth=depth + 1, seen=seen)
