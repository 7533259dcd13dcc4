"""The ``vllm-governor`` command line: one subcommand per module in ``daemon.app.commands``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from daemon.app.commands import (
    apply,
    backtest,
    batch,
    check,
    dashboard,
    demo,
    explain,
    fleet,
    freeze,
    freezes,
    policies,
    proposals,
    quarantine,
    run,
    schema,
    shipped,
    signals,
    sim,
    simulate,
    status,
    test,
    whatif,
)
from daemon.app.config_broken import config_broken
from daemon.app.defaults import EXIT_USAGE
from daemon.core.errors import ConfigError
from daemon.core.version import __version__

SUBCOMMANDS = (
    run,
    check,
    test,
    schema,
    policies,
    shipped,
    status,
    signals,
    explain,
    apply,
    proposals,
    freeze,
    freezes,
    fleet,
    quarantine,
    dashboard,
    demo,
    sim,
    simulate,
    backtest,
    whatif,
    batch,
)


def build_parser() -> argparse.ArgumentParser:
    """The parser for every subcommand."""
    parser = argparse.ArgumentParser(
        prog="vllm-governor",
        description="Keeps vLLM servers in their sweet spot: policies over live metrics, "
        "safe actuation, approvals in chat.",
    )
    parser.add_argument("--version", action="version", version=f"vllm-governor {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "main"):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code: int = args.main(args)
    except ConfigError as exc:
        # One place turns a broken configuration into its exit status, for every command.
        return config_broken(exc)
    return code


if __name__ == "__main__":
    sys.exit(main())
