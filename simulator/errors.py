"""The simulator's error tree.

The simulator stands apart from the governor (an import contract forbids it to import
``daemon``), so it has its own small tree; the CLI translates it at the boundary::

    SimulatorError
    └── SpecError        a profile, vLLM config, trace or workload file is invalid
                         (one SpecIssue per problem: file, line, column, key)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class SimulatorError(Exception):
    """The root of every error the simulator raises on purpose."""


@dataclass(frozen=True, slots=True)
class SpecIssue:
    """One problem in one input file, located as precisely as the format allows.

    Attributes:
        path: The file the problem is in.
        line: 1-based line, or 0 when the problem concerns the file as a whole.
        column: 1-based column, or 0 when unknown.
        key: Dotted key path (``arrivals.rate_rps``), a CSV column, or "".
        message: What is wrong and, where it helps, what to do.
    """

    path: Path
    line: int
    column: int
    key: str
    message: str

    def render(self) -> str:
        """Render as ``path:line:col: key: message``, the format editors and CI read."""
        where = f"{self.key}: " if self.key else ""
        return f"{self.path}:{self.line}:{self.column}: {where}{self.message}"


class SpecError(SimulatorError):
    """An input file of the simulator is invalid; ``issues`` lists every problem found."""

    def __init__(self, issues: list[SpecIssue]) -> None:
        self.issues = tuple(issues)
        super().__init__("\n".join(issue.render() for issue in self.issues))

    def __reduce__(self) -> tuple[type[SpecError], tuple[list[SpecIssue]]]:
        # Pickled as its issues, not its message: a worker process of `simulate --jobs` hands
        # it back to the parent, which would otherwise rebuild it from a string and crash.
        return (type(self), (list(self.issues),))
