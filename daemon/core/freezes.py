"""Freezes: files that stop every change, on the whole host or on one server, until removed.

``touch STATE_DIR/freeze`` freezes every server; ``STATE_DIR/freeze.NAME`` freezes server
NAME. A file may hold an expiry on its first line (ISO 8601, e.g. ``2026-12-01T08:00:00+00:00``);
past it, the freeze no longer counts; a second line, if any, is the reason people gave, and
is shown with the refusal. Files are simple on purpose: an operator can freeze the
governor during an incident with nothing but a shell, and nothing needs the daemon running.
Every actuator reads them through :mod:`daemon.api`: a freeze holds a restart and an admission
cap alike.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

GLOBAL = "freeze"


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
