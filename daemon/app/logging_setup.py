"""Logging set-up: one JSON object per line on stdout (journald reads it), or plain text.

Anything passed as ``extra={...}`` becomes a field of the JSON object. A redaction filter
replaces every known secret value with ``**********`` in case one ever reaches a message, and
the userinfo of any URL (``user:password@``) with ``…(redacted)``.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Literal

from daemon.core.secret_patterns import without_userinfo

_STANDARD_ATTRIBUTES = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
REDACTED = "**********"


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object: time, level, logger, message, extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as a JSON line."""
        document: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRIBUTES and not key.startswith("_"):
                document[key] = value
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str)


class TextFormatter(logging.Formatter):
    """A human-readable line with the extra fields appended as ``key=value``."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as one line of text."""
        extras = " ".join(
            f"{key}={value}"
            for key, value in record.__dict__.items()
            if key not in _STANDARD_ATTRIBUTES and not key.startswith("_")
        )
        line = f"{record.levelname:<7} {record.name}: {record.getMessage()}"
        line = f"{line} {extras}" if extras else line
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class SecretRedactor(logging.Filter):
    """Replaces known secret values in a record's rendered text."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self._secrets = tuple(secret for secret in secrets if secret)

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact the message and every string-valued extra field; never drop a record."""
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            # Arguments that do not fit the message: shown, redacted too, rather than raised.
            message = f"{record.msg} (arguments that do not fit: {record.args!r})"
        record.msg = self._redact(message)
        record.args = None
        for key, value in list(record.__dict__.items()):
            if key not in _STANDARD_ATTRIBUTES and isinstance(value, str):
                setattr(record, key, self._redact(value))
        return True

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        # A password in a URL is no known secret, and libraries log the URLs they request.
        return without_userinfo(text)


def configure_logging(
    level: str, fmt: Literal["json", "text"], secrets: Iterable[str] = ()
) -> None:
    """Send every log record to stdout in ``fmt``, at ``level`` and above."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(SecretRedactor(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


class _Keeper(logging.Handler):
    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def records_kept(level: int = logging.WARNING) -> Iterator[list[logging.LogRecord]]:
    """Keep the records of ``level`` and above logged inside the block, instead of printing them.

    A one-off command that runs daemon code (``signals`` without a daemon) shows what matters
    in its own output; without a handler, Python would print each message bare on stderr,
    its fields lost.
    """
    keeper = _Keeper(level)
    root = logging.getLogger()
    root.addHandler(keeper)
    try:
        yield keeper.records
    finally:
        root.removeHandler(keeper)


def describe(record: logging.LogRecord) -> str:
    """A record as one sentence for people: its message, then its fields in parentheses."""
    fields = ", ".join(
        f"{key}: {value}"
        for key, value in record.__dict__.items()
        if key not in _STANDARD_ATTRIBUTES and not key.startswith("_")
    )
    return f"{record.getMessage()} ({fields})" if fields else record.getMessage()
