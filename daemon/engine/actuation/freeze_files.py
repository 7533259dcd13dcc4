"""Freeze files, from the engine's side: written by ``freeze``, removed by ``unfreeze``.

The format and its one reader belong to :mod:`daemon.core.freezes`, which every actuator's
preflight and the approvals' click-time re-check both use; this module only writes files that
reader honours (a test in ``tests/engine/test_approvals_http.py`` holds the two together).
``STATE_DIR/freeze`` freezes every server, ``STATE_DIR/freeze.NAME`` one server. The first
line is the expiry (ISO 8601 with an offset); the second, the reason for people.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from daemon.approvals.errors import ApprovalError
from daemon.core.freezes import GLOBAL, freeze_reason

__all__ = [
    "EVERYTHING",
    "freeze_path",
    "freeze_reason",
    "freeze_target",
    "remove_freeze",
    "write_freeze",
]

EVERYTHING = "*"


def freeze_target(target: str, known: Iterable[str]) -> str:
    """``target`` if a freeze may name it: ``*`` or a configured server, never a path.

    ``freeze`` and ``unfreeze`` both ask, whoever calls them (the CLI, Slack): a target
    becomes part of a file name in the state directory, and ``x/../../file`` would reach out.

    Raises:
        ApprovalError: any other target.
    """
    names = list(known)
    if target != EVERYTHING and target not in names:
        listed = ", ".join(names) or "none"
        message = f"no vLLM instance named {target!r} (known: {listed}; or * for all)"
        raise ApprovalError(message)
    return target


def freeze_path(state_dir: Path, target: str) -> Path:
    """The file that freezes ``target`` (``*``: every server), always inside ``state_dir``.

    Raises:
        ValueError: ``target`` is not a plain name (checked again here, where files are named).
    """
    if not target or "/" in target or "\0" in target:
        message = f"a freeze target is a server's name, not {target!r}"
        raise ValueError(message)
    return state_dir / (GLOBAL if target == EVERYTHING else f"{GLOBAL}.{target}")


def write_freeze(state_dir: Path, target: str, until: datetime, reason: str) -> Path:
    """Freeze ``target`` until ``until`` (atomically: write, fsync, rename)."""
    path = freeze_path(state_dir, target)
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    # One line for the reason: the reader takes the second line as the whole of it.
    text = f"{until.isoformat()}\n{' '.join(reason.split())}\n"
    scratch = path.with_name(path.name + ".new")
    with scratch.open("w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    scratch.replace(path)
    return path


def remove_freeze(state_dir: Path, target: str) -> bool:
    """Lift the freeze of ``target``; False when there was none."""
    path = freeze_path(state_dir, target)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
