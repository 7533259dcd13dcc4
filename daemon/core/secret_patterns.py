"""Values that look like secrets, masked wherever the governor quotes what it was given.

Secrets belong in the environment or systemd credentials (:mod:`daemon.core.secrets`); the
log redactor replaces the values it knows. A secret pasted where it does not belong (a Slack
token in ``channel``, a password in a URL) is not known to it, so anything quoted back to a
person (a config issue, a log line) goes through :func:`masked` first::

    xoxb-1234-abcd                      -> xoxb-…(redacted)
    https://bot:hunter2@slack.example/  -> https://…(redacted)@slack.example/
    8f14e45fceea167a5a36dedd4bea2543    -> …(redacted)

The patterns: Slack tokens (``xoxa-``, ``xoxb-``, ``xoxp-``, ``xoxr-``, ``xoxe-``,
``xoxs-``, ``xapp-``), the userinfo of a URL, and a bearer-like run of 32 or more letters,
digits and ``-_+=`` that is a hex key (hex digits, some of them digits) or a base64 one (upper
and lower case letters and digits); ``kv_pressure_scale_down_v2_for_gpu0`` is neither.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

MASK = "…(redacted)"

_SLACK_TOKEN = re.compile(r"\b(xox[abeprs]-|xapp-)[A-Za-z0-9-]+")
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s'\"]+@")
_BEARER_LIKE = re.compile(r"[A-Za-z0-9_+=-]{32,}")
_HEX = re.compile(r"[0-9a-f]+")


def masked(text: str) -> str:
    """``text`` with every secret-looking part replaced by ``…(redacted)``."""
    text = without_userinfo(_SLACK_TOKEN.sub(lambda m: m.group(1) + MASK, text))
    return _BEARER_LIKE.sub(_bearer, text)


def without_userinfo(text: str) -> str:
    """``text`` with the userinfo of every URL in it replaced by ``…(redacted)``.

    For log lines: unlike :func:`masked`, it leaves long hex runs (digests, ids) alone.
    """
    return _USERINFO.sub(lambda m: m.group(1) + MASK + "@", text)


def _bearer(match: re.Match[str]) -> str:
    # Hex keys, or base64 ones (upper and lower case and digits, as random keys have); a long
    # snake_case name with a version number in it (a policy's, say) is neither.
    run = match.group(0)
    has_digit = any(char.isdigit() for char in run)
    hex_key = has_digit and (_HEX.fullmatch(run.lower()) is not None)
    base64_key = has_digit and not run.islower() and not run.isupper()
    return MASK if hex_key or base64_key else run


def refuse_credentials(url: str) -> str:
    """``url`` unchanged, or ValueError when it holds a user or password (``user:pw@host``).

    The message never quotes the URL: credentials belong in the environment or a credential.
    """
    try:
        userinfo = "@" in urlsplit(url).netloc
    except ValueError:
        userinfo = False  # not a URL at all: the caller's own check says so
    if userinfo:
        message = (
            "must not hold credentials (user:password@); put secrets in the environment "
            "or a systemd credential, never in config.toml"
        )
        raise ValueError(message)
    return url
