"""Services whose log level the governor sets live over HTTP (``[[http_log_level]]``).

Envoy's admin interface is the model: ``POST /logging?level=debug`` sets every logger, ``GET
/logging`` lists them. Each table is a *target* policies can name (its ``name``), with one knob,
``log_level``, on the logging scale of :data:`daemon.core.knobs.LOG_LEVELS`.

No string from a policy ever reaches a URL: a policy asks for a number (10, 20, 30, 40); the
actuator maps it to the service's own word through ``levels``, which this file fixes, and every
word must be a plain token. Only the literal ``{level}`` is substituted, in ``url`` or ``body``;
any other ``{...}`` is refused when the file is loaded.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from daemon.core.knobs import LOG_LEVELS
from daemon.core.placeholders import refuse_other_placeholders
from daemon.core.secret_patterns import refuse_credentials

LEVEL_PLACEHOLDER = "{level}"
LOG_LEVEL_KNOB = "log_level"
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
# A level word goes into a URL or a body: letters, digits and a few separators, nothing that
# could end a query parameter, start another, or escape a JSON string.
LevelWord = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,32}$")]
LevelName = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
TargetName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LogLevelEnvelope(_Section):
    """The bounds inside which the governor may move a service's log level.

    The same fields as a vLLM knob's envelope (:class:`daemon.core.settings.Envelope`).
    """

    min: float = 10.0
    max: float = 40.0
    max_step: Annotated[float, Field(gt=0)] = 30.0
    min_dwell_s: Annotated[float, Field(ge=0)] = 300.0
    hourly_budget: Annotated[int, Field(ge=0, le=60)] = 4


class HttpLogLevelTarget(_Section):
    """One service whose log level is set through an HTTP endpoint, live (no restart).

    Attributes:
        name: The target name policies use (unique among every target).
        url: Where the level is set; ``{level}`` in its query (or path) takes the service's
            word, URL-encoded, unless ``body`` carries it.
        method: The HTTP method that sets it.
        body: A body template holding ``{level}`` (empty: no body).
        content_type: The body's media type.
        levels: The logging scale's names (``DEBUG``...) to the service's words; the only
            levels the governor may set.
        read_url: Where the level is read back with a GET (empty: ``url`` without its query).
        read_format: ``loggers`` (``name: level`` lines, Envoy's listing: the level is known
            when every logger agrees) or ``plain`` (the body is the word).
        timeout_s: Of each request.
        poll_interval_s: How often the level in force is read (the current value policies see).
        stale_after_s: After this long without a reading, the level is unknown.
        knob: The envelope of ``log_level`` (``[http_log_level.knob]``).
        mode: ``dry-run`` plans and journals changes without sending them.
    """

    name: TargetName
    url: str
    method: Literal["POST", "PUT"] = "POST"
    body: str = ""
    content_type: str = "text/plain"
    levels: dict[LevelName, LevelWord] = Field(min_length=1)
    read_url: str = ""
    read_format: Literal["loggers", "plain"] = "loggers"
    timeout_s: Seconds = 5.0
    poll_interval_s: Seconds = 15.0
    stale_after_s: Seconds = 60.0
    knob: LogLevelEnvelope = LogLevelEnvelope()
    mode: Literal["active", "dry-run"] = "active"

    @field_validator("url", "read_url")
    @classmethod
    def _http_only(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            message = "must be an http:// or https:// URL"
            raise ValueError(message)
        return refuse_credentials(value)

    @field_validator("url", "body")
    @classmethod
    def _only_the_level(cls, value: str) -> str:
        refuse_other_placeholders(value, LEVEL_PLACEHOLDER, _PLACEHOLDER)
        return value

    @model_validator(mode="after")
    def _level_goes_somewhere(self) -> HttpLogLevelTarget:
        """The level appears once, in ``url`` (not its host) or in ``body``; it can be read."""
        places = self.url.count(LEVEL_PLACEHOLDER) + self.body.count(LEVEL_PLACEHOLDER)
        if places != 1:
            message = f"{LEVEL_PLACEHOLDER} must appear exactly once, in url or in body"
            raise ValueError(message)
        parts = urlsplit(self.url)
        if LEVEL_PLACEHOLDER in parts.netloc:
            message = f"{LEVEL_PLACEHOLDER} may not be part of the URL's host"
            raise ValueError(message)
        if LEVEL_PLACEHOLDER in parts.path and not self.read_url:
            message = f"url has {LEVEL_PLACEHOLDER} in its path: set read_url to read it back"
            raise ValueError(message)
        return self

    def level_word(self, value: float) -> str | None:
        """The service's word for a level on the logging scale; None when it is not allowed."""
        words: dict[str, str] = {name: word for name, word in self.levels.items()}  # noqa: C416
        name = next((n for n, level in LOG_LEVELS.items() if level == value), None)
        return None if name is None else words.get(name)

    def level_of(self, word: str) -> float | None:
        """The logging-scale level of one of the service's words (any case); None if unknown."""
        for name, known in self.levels.items():
            if known.lower() == word.strip().lower():
                return float(LOG_LEVELS[name])
        return None

    def reading_url(self) -> str:
        """Where the level is read back."""
        if self.read_url:
            return self.read_url
        parts = urlsplit(self.url)
        return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", "", ""))
