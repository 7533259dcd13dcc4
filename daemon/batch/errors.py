"""The batch jobs' errors.

::

    GovernorError
    └── BatchError                  a batch job cannot be accepted or run as asked
        └── BatchFileError          an input file is invalid (one line per problem:
                                    file:line: what is wrong)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from daemon.core.errors import GovernorError


class BatchError(GovernorError):
    """A batch job cannot be accepted or run as asked; the message says why and what to do."""


class BatchFileError(BatchError):
    """An input file is invalid; ``problems`` holds each as ``file:line: what is wrong``."""

    def __init__(self, path: Path, problems: Sequence[tuple[int, str]]) -> None:
        self.problems = tuple(f"{path}:{line}: {message}" for line, message in problems)
        super().__init__("\n".join(self.problems))
