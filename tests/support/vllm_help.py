"""Reading ``vllm serve --help=all``: which options exist, what they take, their defaults.

argparse prints each option as ``  --name METAVAR`` (takes a value), ``  --name {a,b}``
(choices), ``  --name, --no-name`` (a boolean pair) or a bare ``  --name`` (a switch),
followed by indented help that ends with ``(default: X)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from actuators.vllm.registry import LOG_NAMES, Kind, VersionRegistry, Where

_OPTION = re.compile(r"^  (--[a-z0-9-]+)(.*)$")
_DEFAULT = re.compile(r"\(default: ([^)]*)\)")


@dataclass(frozen=True, slots=True)
class HelpOption:
    """One option of the help text."""

    name: str
    takes_value: bool
    boolean_pair: bool
    choices: tuple[str, ...]
    default: str | None


def options_of(help_text: str) -> dict[str, HelpOption]:
    """Option name without dashes -> what the help says of it."""
    found: dict[str, HelpOption] = {}
    lines = help_text.splitlines()
    for index, line in enumerate(lines):
        match = _OPTION.match(line)
        if match is None:
            continue
        name, rest = match.group(1)[2:], match.group(2).strip()
        choices = re.match(r"^\{([^}]*)\}", rest)
        body = " ".join(lines[index : index + 40])
        default = _DEFAULT.search(body)
        found[name] = HelpOption(
            name=name,
            takes_value=bool(rest) and not rest.startswith(","),
            boolean_pair=rest.startswith(f", --no-{name}"),
            choices=tuple(choices.group(1).split(",")) if choices else (),
            default=default.group(1) if default else None,
        )
    return found


def registry_mismatches(registry: VersionRegistry, help_text: str) -> list[str]:
    """What the registry claims that ``vllm serve --help=all`` contradicts."""
    options = options_of(help_text)
    wrong: list[str] = []
    for flag in registry.knobs.values():
        if flag.where is Where.ENV:
            continue
        option = options.get(flag.key)
        if option is None:
            wrong.append(f"--{flag.key} does not exist")
            continue
        if flag.kind is Kind.BOOL:
            if not option.boolean_pair:
                wrong.append(f"--{flag.key} is not a boolean pair")
        elif not option.takes_value:
            wrong.append(f"--{flag.key} takes no value")
        if flag.kind is Kind.UVICORN_LOG_LEVEL:
            words = {LOG_NAMES[level].lower() for level in LOG_NAMES}
            if not words <= set(option.choices):
                wrong.append(f"--{flag.key} takes {option.choices}, not all of {sorted(words)}")
        numeric = flag.default is not None and flag.kind in (Kind.INT, Kind.FLOAT)
        if numeric and (option.default is None or float(option.default) != flag.default):
            wrong.append(f"--{flag.key} defaults to {option.default}, not {flag.default:g}")
    for key in (*registry.removed, *registry.never):
        if key in options and key not in registry.never:
            wrong.append(f"--{key} is listed as removed but exists")
    return wrong
