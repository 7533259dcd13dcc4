"""Run policy test files: load, simulate each test, compare; results ready to print.

Pure: no printing, no clock. The command line (``vllm-governor test``) prints what this
returns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from daemon.core.errors import ConfigError, ConfigIssue
from daemon.policy.testing.matching import Failure, check
from daemon.policy.testing.places import Place
from daemon.policy.testing.rendering import render_event, render_evidence
from daemon.policy.testing.suites import load_suite
from daemon.policy.testing.timing import format_seconds
from daemon.policy.testing.world import Outcome, simulate

TEST_SUFFIXES = (".test.yaml", ".test.yml")


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One test's result."""

    name: str
    place: Place
    failures: tuple[Failure, ...]
    outcome: Outcome
    interval_s: float

    @property
    def passed(self) -> bool:
        """Whether every expectation held."""
        return not self.failures


@dataclass(frozen=True, slots=True)
class FileResult:
    """One file's result: its problems, or its tests' results."""

    path: Path
    issues: tuple[ConfigIssue, ...]
    cases: tuple[CaseResult, ...]

    @property
    def passed(self) -> bool:
        """Whether the file loaded and every test in it passed."""
        return not self.issues and all(case.passed for case in self.cases)


def find_test_files(paths: Iterable[Path]) -> tuple[list[Path], list[ConfigIssue]]:
    """The files under ``paths``: files as given, directories' ``*.test.yaml`` sorted."""
    files: list[Path] = []
    issues: list[ConfigIssue] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.name.endswith(TEST_SUFFIXES)))
        elif path.is_file():
            files.append(path)
        else:
            issues.append(ConfigIssue(path, 0, 0, "", "no such file or directory"))
    return files, issues


def run_file(path: Path) -> FileResult:
    """Load ``path`` and run each of its tests."""
    try:
        suite = load_suite(path)
    except ConfigError as exc:
        return FileResult(path, exc.issues, ())
    results = []
    for case in suite.cases:
        outcome = simulate(suite, case)
        failures = tuple(check(case, outcome, suite.interval_s))
        results.append(CaseResult(case.name, case.place, failures, outcome, suite.interval_s))
    return FileResult(path, (), tuple(results))


def render_failure(failure: Failure) -> list[str]:
    """``path:line:col: key.path: message``, then the diff, indented."""
    return [failure.place.issue(failure.message).render(), *("    " + d for d in failure.details)]


def render_timeline(result: CaseResult) -> list[str]:
    """Every event of a test, tick by tick, with its evidence: for writing expectations."""
    lines = []
    for event in result.outcome.events:
        at = format_seconds(event.tick * result.interval_s)
        lines.append(f"{at:>8}  {render_event(event)}")
        lines.extend(f"{'':>10}{line}" for line in render_evidence(event))
    return lines
