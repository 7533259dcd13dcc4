"""What goes over the wire for one log level, and what comes back. Pure.

The request is built from the target's configuration and one of its own level words only:
the word is looked up in ``levels`` (a policy gives a number, never text), URL-encoded where
it goes into the URL, and put in place of the single ``{level}`` the configuration holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from daemon.api import LOG_LEVELS, ActuationRefused, HttpLogLevelTarget

_PLACEHOLDER = "{level}"
# Envoy's listing: "active loggers:" then one "  name: level" line per logger.
_LOGGER_LINE = re.compile(r"^\s*[\w.:/-]+:\s*([A-Za-z]+)\s*$")


@dataclass(frozen=True, slots=True)
class LevelRequest:
    """One request that sets a level."""

    method: str
    url: str
    body: bytes
    content_type: str
    word: str


def level_request(target: HttpLogLevelTarget, level: float) -> LevelRequest:
    """The request that sets ``level`` (logging scale) on ``target``.

    Raises:
        ActuationRefused: the level is not one the target's ``levels`` allow.
    """
    word = target.level_word(level)
    if word is None:
        allowed = ", ".join(f"{LOG_LEVELS[name]} ({name})" for name in target.levels)
        message = f"{target.name} does not allow log level {level:g} (allowed: {allowed})"
        raise ActuationRefused(message, "registry")
    url = target.url.replace(_PLACEHOLDER, quote(word, safe=""))
    body = target.body.replace(_PLACEHOLDER, word).encode()
    return LevelRequest(target.method, url, body, target.content_type, word)


def level_in(target: HttpLogLevelTarget, text: str) -> float | None:
    """The level a read-back says is in force; None when it is mixed or not one of ``levels``.

    ``loggers``: every ``name: level`` line must agree (a service with loggers at different
    levels has no single level to report). ``plain``: the body is the word.
    """
    if target.read_format == "plain":
        return target.level_of(text)
    words = {m.group(1).lower() for line in text.splitlines() if (m := _LOGGER_LINE.match(line))}
    if len(words) != 1:
        return None
    return target.level_of(words.pop())
