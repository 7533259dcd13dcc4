"""The one ``{...}`` a configured string may hold: anything else is refused at load time.

A restart command may name ``{unit}``, an HTTP log-level target ``{level}``; the governor
substitutes that one placeholder and nothing else, so a configured string cannot smuggle in a
value the governor never meant to fill in. Each caller says what counts as a placeholder.
"""

from __future__ import annotations

import re


def refuse_other_placeholders(text: str, allowed: str, pattern: re.Pattern[str]) -> None:
    """Raise :class:`ValueError` (for pydantic) naming a ``pattern`` match other than ``allowed``.

    Args:
        text: The configured string.
        allowed: The one placeholder the governor substitutes in it, braces included.
        pattern: What looks like a placeholder in this kind of string.
    """
    for placeholder in pattern.findall(text):
        if placeholder != allowed:
            message = f"{placeholder} is not substituted; only {allowed} is"
            raise ValueError(message)
