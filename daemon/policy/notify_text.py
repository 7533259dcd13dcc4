"""The text of a ``notify`` action: a template whose ``{name}`` fields are filled, never evaluated.

A field is a signal the policy's ``when`` reads, or one of :data:`BUILTINS` (``policy``,
``target``, ``held_for``, ``condition``). Nothing else can be named: the fields are checked when
the file is loaded, and filling one is a dictionary lookup and a number format, so a template
cannot run code or reach an attribute (unlike ``str.format``). ``{{`` and ``}}`` write braces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

BUILTINS = frozenset({"policy", "target", "held_for", "condition"})
_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


def template_problems(template: str, signals: Iterable[str]) -> list[str]:
    """Every problem of ``template`` when the policy reads ``signals``; empty when usable."""
    known = BUILTINS | set(signals)
    problems = []
    for match in _FIELD.finditer(template):
        name = match.group(1)
        if name is None:
            continue  # an escaped brace
        if not _NAME.match(name):
            problems.append(f"{{{name}}} is not a field name (write {{{{ and }}}} for braces)")
        elif name not in known:
            readable = ", ".join(sorted(known))
            problems.append(f"{{{name}}} is not a signal the condition reads (fields: {readable})")
    stray = _FIELD.sub("", template)
    if "{" in stray or "}" in stray:
        problems.append("an unmatched brace (write {{ and }} for braces)")
    return problems


def render(template: str, values: Mapping[str, Any]) -> str:
    """Fill each field from ``values``; a missing value reads ``no data``."""

    def fill(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in {"{{", "}}"}:
            return token[0]
        return shown(values.get(match.group(1)))

    return _FIELD.sub(fill, template)


def shown(value: Any) -> str:
    """One value as people read it: numbers short, maps as ``key=value`` pairs."""
    if value is None:
        return "no data"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{key}={shown(item)}" for key, item in sorted(value.items()))
    return str(value)
