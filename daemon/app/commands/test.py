"""``vllm-governor test``: run policy test files, as ``promtool test rules`` does for alerts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from daemon.app.defaults import EXIT_FAILURE, EXIT_OK

if TYPE_CHECKING:
    from daemon.policy.testing.runner import FileResult


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``test`` subcommand."""
    parser = subparsers.add_parser(
        "test",
        help="run policy tests: signal series in, expected decisions out",
        description="Run policy test files (see docs/policies.md, 'Policy tests'). Each test "
        "feeds signal series to the policies on a simulated clock and checks the decisions, "
        "actions and approvals at given times. Exits 0 when every test passes, 1 otherwise; "
        "problems in a file are printed as 'path:line:col: message'.",
    )
    parser.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="test files, or directories of *.test.yaml",
    )
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="also print every decision of every test, with its evidence",
    )
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Run every file and print a line per test, a diff per failure, and a summary."""
    from daemon.policy.testing.runner import find_test_files, run_file

    files, issues = find_test_files(args.files)
    for issue in issues:
        print(issue.render())
    if not files:
        print("no test files found (directories are searched for *.test.yaml)")
        return EXIT_FAILURE
    passed = failed = broken = 0
    for path in files:
        result = run_file(path)
        _print(result, timeline=args.timeline)
        passed += sum(case.passed for case in result.cases)
        failed += sum(not case.passed for case in result.cases)
        broken += bool(result.issues)
    summary = f"{passed} passed, {failed} failed"
    if broken or issues:
        summary += f", {broken + len(issues)} file(s) with problems"
    print(summary)
    return EXIT_FAILURE if failed or broken or issues else EXIT_OK


def _print(result: FileResult, *, timeline: bool) -> None:
    from daemon.policy.testing.runner import render_failure, render_timeline

    for issue in result.issues:
        print(issue.render())
    for case in result.cases:
        print(f"{'ok  ' if case.passed else 'FAIL'} {result.path}: {case.name}")
        for failure in case.failures:
            print("\n".join(render_failure(failure)))
        if timeline:
            print("\n".join(render_timeline(case)) or "    (no decisions)")
