"""The governor's error tree.

Every error the governor raises on purpose derives from :class:`GovernorError`; errors of
third-party libraries are translated at the boundary (``raise ... from exc``)::

    GovernorError
    ├── ConfigError                 a configuration or policy file is invalid
    │                               (one ConfigIssue per problem: file, line, column, key path)
    ├── SecretError                 a secret is missing or unreadable (never carries the value)
    ├── SourceError                 a source could not produce samples this time (retried)
    │   ├── SourceUnavailable       the far end refused or timed out (e.g. vLLM still loading)
    │   ├── MetricsParseError       the far end answered something that is not usable metrics
    │   └── CommandRefused          the far end answered but refused a command (HAProxy:
    │                               an unknown backend or server, a bad value)
    ├── HttpExchangeError           (daemon/core/http_client.py) one HTTP exchange got no
    │                               answer: refused, timed out, cut off, malformed, too large
    │                               (``kind`` says which); sources and actuators translate it
    ├── ControlError                talking to the running daemon over its control socket failed
    │   └── DaemonNotRunningError   no daemon listens on the control socket
    ├── ActuationError              a change to a vLLM server could not go as planned
    │   ├── ActuationRefused        planning or preflight said no: nothing was touched
    │   ├── ChangeInFlight          another change of the same server is not finished yet
    │   └── ConfigWriteError        a config file could not be replaced; the old one is intact
    ├── ApprovalError               (daemon/approvals/errors.py) a proposal or click is unusable
    │   ├── ProposalError           a decision that cannot become a proposal
    │   ├── InvalidTransition       a proposal asked to move where its state machine forbids
    │   ├── UnverifiedRequest       an interactivity request failed its signature or replay check
    │   └── SlackCallFailed         (daemon/engine/approvals/slack/slack_api.py) a Slack Web
    │                               API call failed after its retries
    ├── BacktestError               (daemon/app/backtest/errors.py) a recording, a Prometheus
    │                               range or an option the backtest cannot use
    ├── DemoError                   (daemon/app/demo/children.py) a piece of the demo could
    │                               not start or run
    ├── WhatIfError                 (daemon/whatif/errors.py) a what-if could not be answered:
    │                               too little data, a profile that does not load, a worker
    │                               past its CPU bound
    └── TaskCrashedError            an eternal task of the supervisor ended or crashed
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from daemon.core.secret_patterns import masked


class GovernorError(Exception):
    """The root of every error the governor raises on purpose."""


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One problem in one file, located as precisely as the file format allows.

    Attributes:
        path: The file the problem is in.
        line: 1-based line, or 0 when the problem concerns the file as a whole.
        column: 1-based column, or 0 when unknown.
        key_path: Dotted key path inside the document (``vllm.0.url``), or "".
        message: What is wrong and, where it helps, what to do.
    """

    path: Path
    line: int
    column: int
    key_path: str
    message: str

    def __post_init__(self) -> None:
        # Issues quote what a file says, and a secret pasted into the wrong field would be
        # echoed to the terminal, the log and status: secret-looking parts never are.
        object.__setattr__(self, "key_path", masked(self.key_path))
        object.__setattr__(self, "message", masked(self.message))

    def render(self) -> str:
        """Render as ``path:line:col: message``, the format editors and CI annotators read."""
        where = f"{self.key_path}: " if self.key_path else ""
        return f"{self.path}:{self.line}:{self.column}: {where}{self.message}"


class ConfigError(GovernorError):
    """A configuration or policy file is invalid; ``issues`` lists every problem found."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = tuple(issues)
        super().__init__("\n".join(issue.render() for issue in self.issues))


class SecretError(GovernorError):
    """A secret the configuration needs is missing or unreadable. Never holds the value."""


class SourceError(GovernorError):
    """A source could not produce samples this time; its runner retries with backoff.

    ``detail`` is a short machine-readable qualifier of the source's state (``starting``,
    ``unhealthy``) shown in status; the message is for people.
    """

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class SourceUnavailable(SourceError):
    """The far end refused the connection or did not answer in time."""


class MetricsParseError(SourceError):
    """The far end answered, but not with metrics the governor can use."""


class CommandRefused(SourceError):
    """The far end answered, but refused the command: it names nothing there, or a bad value.

    Retrying will not help until the configuration changes; ``detail`` says which
    (``unknown-server``, ``denied``, ``refused``).
    """


class HttpExchangeError(GovernorError):
    """One HTTP exchange got no usable answer; ``kind`` says how (see daemon.core.http_client).

    An answer with an error status is an answer, never this error.
    """

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class ControlError(GovernorError):
    """Talking to the running daemon over its control socket failed."""


class DaemonNotRunningError(ControlError):
    """No daemon is listening on the control socket."""


class TaskCrashedError(GovernorError):
    """An eternal task of the supervisor ended or crashed, so the daemon must stop."""


class ActuationError(GovernorError):
    """A change to a vLLM server could not go as planned."""


class ActuationRefused(ActuationError):
    """Planning or preflight refused the change before anything was touched.

    ``guard`` names the rule that refused it (``envelope``, ``frozen``, ``registry``...), for
    records and metrics; the message says why, for people. ``refusals`` are every rule that
    refused it, as (guard, why), the first one's first; one, the guard and the message, unless
    given.
    """

    def __init__(self, message: str, guard: str, refusals: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.guard = guard
        self.refusals: tuple[tuple[str, str], ...] = tuple(refusals) or ((guard, message),)


class ChangeInFlight(ActuationError):
    """Another change of the same server is journaled and not finished: one at a time."""


class ConfigWriteError(ActuationError):
    """A config file could not be replaced atomically; the file on disk is the old one."""
