"""The plan of a change: old and new files, the knobs, the command, the reason. Pure.

A plan is made from the files as they are on disk now and is journaled whole before anything
is touched: its old file contents *are* the last-known-good configuration (the server was
checked to be serving on them), and its new contents are what will be written.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actuators.vllm.atomic_files import FileSnapshot
from actuators.vllm.config_text import (
    knob_value,
    read_env,
    read_yaml_options,
    rendered,
    set_env_var,
    set_yaml_option,
)
from actuators.vllm.registry import VersionRegistry, Where
from daemon.api import ActuationError, ActuationRefused, ChangeRequest, VllmInstance

# The shape of a journaled plan; a governor refuses to act on a newer one it cannot read.
PLAN_VERSION = 1


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file: as it is, and as it will be."""

    old: FileSnapshot
    new_text: str

    @property
    def path(self) -> Path:
        """The file."""
        return self.old.path

    @property
    def changed(self) -> bool:
        """Whether writing it changes anything."""
        return self.new_text != self.old.text


@dataclass(frozen=True, slots=True)
class ChangePlan:
    """Everything the change will do, and why.

    Attributes:
        target: The vLLM instance name.
        policy: The policy that asked.
        registry: The vLLM version whose registry was used.
        knobs: Knob -> (value now, value planned).
        files: The files to write, in order (YAML first, then the environment file).
        restart: The restart command's arguments.
        reason: Why, in a sentence.
        evidence: The signal values behind the decision.
        operation: ``restart`` for a restart without a config change (the files stay as they
            are), or None for a change of knob values.
    """

    target: str
    policy: str
    registry: str
    knobs: Mapping[str, tuple[float | None, float]]
    files: tuple[FileChange, ...]
    restart: tuple[str, ...]
    reason: str
    evidence: Mapping[str, Any]
    operation: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The plan for the journal: it holds the last-known-good files in full."""
        return {
            "version": PLAN_VERSION,
            "target": self.target,
            "policy": self.policy,
            "registry": self.registry,
            "knobs": {knob: list(values) for knob, values in self.knobs.items()},
            "files": [
                {
                    "path": str(change.path),
                    "existed": change.old.exists,
                    "mode": change.old.mode,
                    "old": change.old.text,
                    "new": change.new_text,
                }
                for change in self.files
            ],
            "restart": list(self.restart),
            "reason": self.reason,
            "evidence": dict(self.evidence),
            "operation": self.operation,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChangePlan:
        """The plan a journal entry holds (:meth:`as_json`), as the governor that wrote it meant it.

        A governor that reconciles or reverts a change reads it back through here, so the
        revert path works on the same typed plan as the forward one.

        Raises:
            ActuationError: the entry holds no plan this governor can read (a newer version, or
                a body that is not a plan).
        """
        version = int(data.get("version", 1))  # plans journaled before versioning were 1
        if version > PLAN_VERSION:
            message = (
                f"a change plan of version {version}, newer than this governor's {PLAN_VERSION}"
            )
            raise ActuationError(message)
        try:
            files = tuple(
                FileChange(
                    FileSnapshot(
                        Path(file["path"]),
                        bool(file["existed"]),
                        str(file["old"]),
                        int(file["mode"]),
                    ),
                    str(file["new"]),
                )
                for file in data["files"]
            )
            knobs = {
                str(knob): (None if old is None else float(old), float(new))
                for knob, (old, new) in data["knobs"].items()
            }
            return cls(
                target=str(data["target"]),
                policy=str(data.get("policy", "")),
                registry=str(data.get("registry", "")),
                knobs=knobs,
                files=files,
                restart=tuple(str(arg) for arg in data["restart"]),
                reason=str(data.get("reason", "")),
                evidence=dict(data.get("evidence") or {}),
                operation=data.get("operation"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            message = f"a journal entry holds no readable change plan ({type(exc).__name__}: {exc})"
            raise ActuationError(message) from exc

    @property
    def changes(self) -> dict[str, float]:
        """Knob -> the value planned."""
        return {knob: new for knob, (_old, new) in self.knobs.items()}

    def render(self) -> str:
        """What would be written and run, for people (``apply --dry-run``)."""
        return render_plan(self.as_json())


def render_plan(plan: Mapping[str, Any]) -> str:
    """A journaled plan (:meth:`ChangePlan.as_json`) as people read it: knobs, diffs, command."""
    lines = [f"plan for {plan['target']} (policy {plan['policy']}, vLLM {plan['registry']})"]
    if plan.get("reason"):
        lines.append(f"  why: {plan['reason']}")
    if plan.get("operation") == "restart":
        lines.append("  operation: restart, no config change")
    for knob, (old, new) in plan["knobs"].items():
        shown = "unknown" if old is None else f"{old:g}"
        lines.append(f"  {knob}: {shown} -> {new:g}")
    for file in plan["files"]:
        if file["new"] != file["old"]:
            diff = difflib.unified_diff(
                file["old"].splitlines(keepends=True),
                file["new"].splitlines(keepends=True),
                fromfile=f"{file['path']} (now)",
                tofile=f"{file['path']} (planned)",
            )
            lines.append("".join(diff).rstrip("\n"))
    lines.append(f"  then run (no shell): {json.dumps(plan['restart'])}")
    return "\n".join(lines)


def make_plan(
    instance: VllmInstance,
    request: ChangeRequest,
    registry: VersionRegistry,
    yaml_file: FileSnapshot,
    env_file: FileSnapshot | None,
) -> ChangePlan:
    """Edit the files in memory for every knob of ``request``.

    Raises:
        ActuationRefused: a knob the version lacks, a value out of range, a file that cannot
            be edited safely, or a knob whose file is not configured.
    """
    yaml_text = yaml_file.text
    env_text = env_file.text if env_file is not None else ""
    where_yaml = str(yaml_file.path)
    options = read_yaml_options(yaml_text, where_yaml)
    env = read_env(env_text)
    knobs: dict[str, tuple[float | None, float]] = {}
    for knob, value in request.changes.items():
        flag = registry.flag(knob)
        text = rendered(flag, value)
        knobs[knob] = (knob_value(flag, options, env), value)
        if flag.where is Where.YAML:
            yaml_text = set_yaml_option(yaml_text, flag.key, text, where_yaml)
        elif env_file is None:
            message = f"{knob} is set in the unit's environment file, but env_file is not set"
            raise ActuationRefused(message, "config")
        else:
            env_text = set_env_var(env_text, flag.key, text, str(env_file.path))
    files = [FileChange(yaml_file, yaml_text)]
    if env_file is not None:
        files.append(FileChange(env_file, env_text))
    return ChangePlan(
        target=instance.name,
        policy=request.policy,
        registry=registry.name,
        knobs=knobs,
        files=tuple(files),
        restart=instance.restart_argv(),
        reason=request.reason,
        evidence=request.evidence,
        operation=request.operation,
    )
