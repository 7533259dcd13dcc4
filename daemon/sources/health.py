"""Per-source health: whether a source works, since when, and why not.

A source moves between states; each change is logged once (not at every failed attempt), so
an outage of an hour is two log lines, not thousands.

A failure's reason often quotes what the source answered (a line of a page, a broker's words),
which whoever serves it chooses: the board keeps it as one line of plain text, at most
:data:`MAX_ERROR_CHARS` long, every control character (an ANSI escape would restyle or clear
the terminal of whoever runs ``status``) and bidirectional override shown as ``?``.
"""

from __future__ import annotations

import logging
import unicodedata
from dataclasses import dataclass
from enum import Enum

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 500
# Embeddings, overrides and isolates: U+202A..U+202E and U+2066..U+2069 ("Trojan Source").
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class SourceState(Enum):
    """Where a source stands."""

    STARTING = "starting"  # never succeeded yet
    UP = "up"  # last attempt succeeded
    DOWN = "down"  # last attempt failed


@dataclass(frozen=True, slots=True)
class SourceHealth:
    """A snapshot of one source's health."""

    source: str
    state: SourceState
    since: float
    last_success: float | None
    last_error: str
    detail: str = ""


class HealthBoard:
    """Health of every source, with one log line per state change."""

    def __init__(self) -> None:
        self._health: dict[str, SourceHealth] = {}

    def register(self, source: str, now: float) -> None:
        """Declare a source before its first attempt."""
        self._health[source] = SourceHealth(source, SourceState.STARTING, now, None, "")

    def succeeded(self, source: str, now: float, detail: str = "") -> None:
        """Record a successful attempt; ``detail`` qualifies it (e.g. ``unhealthy``)."""
        old = self._health.get(source)
        if old is None or old.state is not SourceState.UP or old.detail != detail:
            log.info("source up", extra={"source": source, "detail": detail})
            since = now
        else:
            since = old.since
        self._health[source] = SourceHealth(source, SourceState.UP, since, now, "", detail)

    def failed(self, source: str, now: float, error: str, detail: str = "") -> None:
        """Record a failed attempt with a one-line reason (made plain text, bounded)."""
        error = plain_reason(error)
        old = self._health.get(source)
        last_success = old.last_success if old else None
        if old is None or old.state is not SourceState.DOWN or old.detail != detail:
            log.warning("source down", extra={"source": source, "error": error, "detail": detail})
            since = now
        else:
            since = old.since
        self._health[source] = SourceHealth(
            source, SourceState.DOWN, since, last_success, error, detail
        )

    def forget(self, source: str) -> None:
        """A source left the configuration: it has no health any more."""
        self._health.pop(source, None)

    def get(self, source: str) -> SourceHealth | None:
        """Health of ``source``, if registered."""
        return self._health.get(source)

    def all(self) -> list[SourceHealth]:
        """Health of every source, by name."""
        return [self._health[name] for name in sorted(self._health)]


def plain_reason(text: str) -> str:
    """``text`` on one line of at most :data:`MAX_ERROR_CHARS`, controls shown as ``?``."""
    flat = " ".join(text.split())
    if len(flat) > MAX_ERROR_CHARS:
        flat = flat[: MAX_ERROR_CHARS - 1] + "…"
    return "".join(
        "?" if unicodedata.category(char) == "Cc" or char in _BIDI_CONTROLS else char
        for char in flat
    )
