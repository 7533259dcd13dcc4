"""Freezes: files that stop every change, on the whole host or on one server, until removed.

``touch STATE_DIR/freeze`` freezes every server; ``STATE_DIR/freeze.NAME`` freezes server
NAME. A file may hold an expiry on its first line (ISO 8601, e.g. ``2026-12-01T08:00:00+00:00``);
past it, the freeze no longer counts; a second line, if any, is the reason people gave, and
is shown with the refusal (the daemon ends it with ``(by WHO)``, naming who froze). Files are
simple on purpose: an operator can freeze the
governor during an incident with nothing but a shell, and nothing needs the daemon running.
Every actuator reads them through :mod:`daemon.api`: a freeze holds a restart and an admission
cap alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

GLOBAL = "freeze"
EVERYTHING = "*"
# ``vllm-governor freeze`` (and Slack) end the reason with who froze.
_BY = re.compile(r"^(?P<reason>.*?)\s*\(by (?P<by>[^()]+)\)$")


@dataclass(frozen=True, slots=True)
class Freeze:
    """One freeze in force, as ``status`` and ``freezes`` show it.

    Attributes:
        target: The server's name, or ``*`` for every server.
        path: The file that holds it.
        until: When it ends by itself; None while the file stays (no expiry in it).
        reason: Why, as people gave it ("" when the file says nothing).
        by: Who froze ("" when the file does not say: a ``touch`` by hand).
    """

    target: str
    path: Path
    until: datetime | None
    reason: str
    by: str

    def as_json(self) -> dict[str, Any]:
        """The freeze as ``status --json`` and ``freezes --json`` spell it."""
        return {
            "target": self.target,
            "by": self.by,
            "reason": self.reason,
            "until": None if self.until is None else self.until.isoformat(),
            "file": str(self.path),
        }


def freezes_in_force(directory: Path, now: datetime) -> list[Freeze]:
    """Every freeze of ``directory`` that counts at ``now``: the global one first, then by name.

    An unreadable file counts (as :func:`freeze_reason` treats it) and says so in its reason;
    an expired one, and the scratch files a writer leaves while it renames, do not.
    """
    try:
        paths = sorted(directory.glob(f"{GLOBAL}*"))
    except OSError:
        return []
    found = []
    for path in paths:
        if path.name != GLOBAL and (
            not path.name.startswith(f"{GLOBAL}.") or path.name.endswith(".new")
        ):
            continue
        target = EVERYTHING if path.name == GLOBAL else path.name.removeprefix(f"{GLOBAL}.")
        try:
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except FileNotFoundError:
            continue  # lifted since the listing
        except OSError as exc:
            found.append(Freeze(target, path, None, f"cannot be read ({exc})", ""))
            continue
        if (freeze := _freeze_of(target, path, text, now)) is not None:
            found.append(freeze)
    return sorted(found, key=lambda freeze: (freeze.target != EVERYTHING, freeze.target))


def _freeze_of(target: str, path: Path, text: str, now: datetime) -> Freeze | None:
    lines = text.splitlines()
    until = _expiry(text)
    if until is not None and until <= now:
        return None
    # Without an expiry, the first line (if any) is what people wrote: the reason.
    said = (lines[1] if len(lines) > 1 else "") if until is not None else (lines[:1] or [""])[0]
    said = said.strip()
    if match := _BY.match(said):
        return Freeze(target, path, until, match["reason"], match["by"].strip())
    return Freeze(target, path, until, said, "")


def freeze_reason(directory: Path, instance: str, now: datetime) -> str:
    """Why changes of ``instance`` are frozen now; "" when they are not."""
    for path in (directory / GLOBAL, directory / f"{GLOBAL}.{instance}"):
        try:
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"{path} exists but cannot be read ({exc}): treated as a freeze"
        until = _expiry(text)
        if until is None:
            return f"frozen by {path}" + (f" ({text.splitlines()[0]})" if text else "")
        if until > now:
            # The second line is the reason people gave (``vllm-governor freeze --reason``).
            lines = text.splitlines()
            why = f": {lines[1].strip()}" if len(lines) > 1 and lines[1].strip() else ""
            return f"frozen by {path} until {until.isoformat()}{why}"
    return ""


def _expiry(text: str) -> datetime | None:
    """The expiry on the first line, or None (no expiry: frozen until the file goes)."""
    if not text:
        return None
    try:
        until = datetime.fromisoformat(text.splitlines()[0].strip())
    except ValueError:
        return None
    return until if until.tzinfo is not None else None
