"""vLLM version strings as ``/version`` reports them: ``0.33.0``, ``0.34.0rc1``, ``0.35.1.dev7``."""

from __future__ import annotations

import re
from typing import NamedTuple

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


class Version(NamedTuple):
    """A release number; pre-release and local parts are dropped (0.34.0rc1 is 0.34.0)."""

    major: int
    minor: int
    patch: int


def parse_version(text: str) -> Version | None:
    """The release number in ``text``, or None when it has none."""
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    major, minor, patch = match.groups()
    return Version(int(major), int(minor), int(patch or 0))
