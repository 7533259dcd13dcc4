"""``vllm-governor schema``: the JSON Schema of policy files (or test files), for editors."""

from __future__ import annotations

import argparse
import sys

from daemon.app.defaults import EXIT_OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``schema`` subcommand."""
    parser = subparsers.add_parser(
        "schema",
        help="print the JSON Schema of policy files",
        description="Print the JSON Schema of a policy file (or, with --tests, of a policy test "
        "file), generated from the models the governor validates with. Point "
        "yaml-language-server at it: '# yaml-language-server: $schema=PATH' on a file's first "
        "line.",
    )
    parser.add_argument(
        "--tests", action="store_true", help="the schema of policy test files instead"
    )
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Print the schema."""
    from daemon.policy.schemas import policy_schema, policy_test_schema, render

    sys.stdout.write(render(policy_test_schema() if args.tests else policy_schema()))
    return EXIT_OK
