"""The knob values a server's files set now, read for every evaluation and cached by mtime.

The evaluator asks every tick; the files change rarely. A (mtime, size) pair per file decides
whether to read again. What the files say is what the server *will* run after its next
restart, and, since only the governor writes them while it runs a change, what it runs now.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from actuators.vllm.config_text import knob_value, read_env, read_yaml_options
from actuators.vllm.registry import V0_33, VersionRegistry
from daemon.api import ActuationRefused, VllmInstance

log = logging.getLogger(__name__)

_Stamp = tuple[tuple[int, int] | None, ...]


class KnobReader:
    """Reads and caches the knob values of each instance's files."""

    def __init__(self, registry: VersionRegistry = V0_33) -> None:
        self._registry = registry
        self._cache: dict[str, tuple[_Stamp, Mapping[str, float]]] = {}

    def read(self, instance: VllmInstance) -> Mapping[str, float]:
        """Known knob values; empty when the instance has no readable config file."""
        if instance.config_path is None:
            return {}
        paths = (instance.config_path, instance.env_file)
        stamp = tuple(_stamp(path) for path in paths)
        cached = self._cache.get(instance.name)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        values = self._values(instance.name, instance.config_path, instance.env_file)
        self._cache[instance.name] = (stamp, values)
        return values

    def _values(self, name: str, config_path: Path, env_file: Path | None) -> Mapping[str, float]:
        path = config_path
        try:
            options = read_yaml_options(config_path.read_text(encoding="utf-8"), str(config_path))
            path = env_file or config_path
            env = read_env(_text_or_empty(env_file))
        except (OSError, UnicodeDecodeError, ActuationRefused) as exc:
            # The message names the file and why: on a terminal (``apply``) the log's extra
            # fields are not shown.
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            log.warning(
                "cannot read %s, a vLLM config file of %s (its knobs are unknown): %s",
                path,
                name,
                reason,
                extra={"instance": name, "file": str(path), "error": str(exc)},
            )
            return {}
        values = {}
        for knob, flag in self._registry.knobs.items():
            value = knob_value(flag, options, env)
            if value is not None:
                values[knob] = value
        return values


def _text_or_empty(path: Path | None) -> str:
    """A missing environment file sets nothing, as systemd's ``EnvironmentFile=-`` reads it."""
    if path is None:
        return ""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def _stamp(path: Path | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        found = path.stat()
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_size)
