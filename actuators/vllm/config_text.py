"""Reading knob values from vLLM's files, and editing one value without disturbing the rest.

vLLM's ``--config`` YAML is a flat mapping of long option names (either spelling:
``max-num-seqs`` or ``max_num_seqs``; vLLM rewrites underscores to dashes). An edit replaces
the value on the key's own line, keeping the operator's comments, order and spelling, or
appends the key when the file does not set it; the result is parsed again and must equal
the old mapping with exactly that one value changed, or the edit is refused. The unit's
environment file (systemd's ``EnvironmentFile=`` syntax: ``NAME=value`` lines, ``#`` and
``;`` comments) is edited the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from actuators.vllm.registry import LOG_NAMES, Kind, KnobFlag, Where
from daemon.api import LOG_LEVELS, ActuationRefused

_UVICORN_EXTRA = {"critical": 50, "trace": 5}


def read_yaml_options(text: str, where: str) -> dict[str, Any]:
    """The options a ``--config`` file sets, keyed by their dashed names.

    Raises:
        ActuationRefused: not YAML, not a mapping, or one option given twice.
    """
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        message = f"{where} is not valid YAML: {exc}"
        raise ActuationRefused(message, "config_file") from exc
    if document is None:
        return {}
    if not isinstance(document, dict):
        message = f"{where} must be a mapping of vLLM options"
        raise ActuationRefused(message, "config_file")
    options: dict[str, Any] = {}
    for key, value in document.items():
        name = str(key).replace("_", "-")
        if name in options:
            message = f"{where} sets {name} twice (both spellings); vLLM would refuse it"
            raise ActuationRefused(message, "config_file")
        options[name] = value
    return options


def read_env(text: str) -> dict[str, str]:
    """The variables of an environment file, as systemd reads the simple cases."""
    variables: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        name, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        variables[name.strip()] = value
    return variables


def knob_value(flag: KnobFlag, options: Mapping[str, Any], env: Mapping[str, str]) -> float | None:
    """The knob's value as the files set it (or vLLM's fixed default); None when unknown."""
    raw: Any = env.get(flag.key) if flag.where is Where.ENV else options.get(flag.key)
    if raw is None:
        return flag.default
    return _number(flag.kind, raw)


def _number(kind: Kind, raw: Any) -> float | None:
    level: int | None
    if kind is Kind.BOOL:
        return float(raw) if isinstance(raw, bool) else None
    if kind in (Kind.VLLM_LOG_LEVEL, Kind.UVICORN_LOG_LEVEL):
        name = str(raw).lower()
        level = LOG_LEVELS.get(name.upper())
        if level is None and kind is Kind.UVICORN_LOG_LEVEL:
            level = _UVICORN_EXTRA.get(name)
        return None if level is None else float(level)
    # argparse reads "8" as 8 (vLLM's file becomes a command line), but never a boolean.
    try:
        value = None if isinstance(raw, bool) else float(str(raw))
    except ValueError:
        value = None
    if value is not None and kind is Kind.INT and value != int(value):
        return None
    return value


def rendered(flag: KnobFlag, value: float) -> str:
    """The text written for ``value``: a YAML scalar, or an environment value.

    Raises:
        ActuationRefused: the value is not one the knob can take.
    """
    if not flag.minimum <= value <= flag.maximum:
        message = (
            f"{flag.knob}={value:g} is outside what vLLM accepts for --{flag.key} "
            f"[{flag.minimum:g}, {flag.maximum:g}]"
        )
        raise ActuationRefused(message, "registry")
    if flag.kind is Kind.INT:
        return str(int(value))
    if flag.kind is Kind.FLOAT:
        # PyYAML reads "1e-05" as a string; its own dump of a float always reads back.
        return yaml.safe_dump(float(value)).splitlines()[0]
    if flag.kind is Kind.BOOL:
        return "true" if value else "false"
    name = LOG_NAMES.get(int(value)) if value == int(value) else None
    if name is None:
        levels = ", ".join(f"{level} ({text})" for level, text in sorted(LOG_NAMES.items()))
        message = f"{flag.knob}={value:g} is not a log level; use one of {levels}"
        raise ActuationRefused(message, "registry")
    return name if flag.kind is Kind.VLLM_LOG_LEVEL else name.lower()


def set_yaml_option(text: str, key: str, value_text: str, where: str) -> str:
    """``text`` with top-level option ``key`` set to ``value_text`` (a YAML scalar).

    Raises:
        ActuationRefused: the key's value is not a one-line scalar, or the edited file would
            not read back as the old mapping with this one value changed.
    """
    before = read_yaml_options(text, where)
    spelled = re.escape(key).replace(r"\-", "[-_]")
    pattern = re.compile(
        rf"^(?P<key>{spelled})(?P<sep>[ \t]*:[ \t]*)(?P<value>[^#\r\n]*?)"
        r"(?P<tail>[ \t]+#[^\r\n]*)?(?P<end>\r?\n?)$"
    )
    lines = text.splitlines(keepends=True)
    found = [number for number, line in enumerate(lines) if pattern.match(line)]
    if len(found) > 1:
        message = f"{where} sets {key} on several lines; edit it by hand first"
        raise ActuationRefused(message, "config_file")
    if found:
        match = pattern.match(lines[found[0]])
        assert match is not None
        if not match["value"].strip():
            message = f"{where}: {key} is not a one-line value; the governor will not rewrite it"
            raise ActuationRefused(message, "config_file")
        lines[found[0]] = (
            f"{match['key']}{match['sep']}{value_text}{match['tail'] or ''}{match['end']}"
        )
        edited = "".join(lines)
    else:
        separator = "" if not text or text.endswith("\n") else "\n"
        edited = f"{text}{separator}{key}: {value_text}\n"
    expected = {**before, key: yaml.safe_load(value_text)}
    if read_yaml_options(edited, where) != expected:
        message = f"{where}: setting {key} by editing its line would change more than {key}"
        raise ActuationRefused(message, "config_file")
    return edited


def set_env_var(text: str, name: str, value: str, where: str) -> str:
    """``text`` with variable ``name`` set to ``value`` (a plain word such as WARNING).

    Raises:
        ActuationRefused: the variable is set on several lines.
    """
    pattern = re.compile(rf"^[ \t]*(export[ \t]+)?{re.escape(name)}[ \t]*=")
    lines = text.splitlines(keepends=True)
    found = [number for number, line in enumerate(lines) if pattern.match(line)]
    if len(found) > 1:
        message = f"{where} sets {name} on several lines; edit it by hand first"
        raise ActuationRefused(message, "config_file")
    if found:
        end = "\n" if lines[found[0]].endswith("\n") else ""
        lines[found[0]] = f"{name}={value}{end}"
        edited = "".join(lines)
    else:
        separator = "" if not text or text.endswith("\n") else "\n"
        edited = f"{text}{separator}{name}={value}\n"
    if read_env(edited) != {**read_env(text), name: value}:
        message = f"{where}: setting {name} would change more than {name}"
        raise ActuationRefused(message, "config_file")
    return edited
