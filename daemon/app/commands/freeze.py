"""``vllm-governor freeze`` and ``unfreeze``: stop every change of a server, or of all, for a while.

A freeze is a file in the state directory that the actuator checks before every change and the
approvals check on every click; it carries its expiry, so a forgotten freeze ends by itself.
"""

from __future__ import annotations

import argparse
import sys

from daemon.app.commands.control_command import add_control_options, ask
from daemon.app.defaults import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from daemon.policy.durations import parse_duration


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``freeze`` and ``unfreeze`` subcommands."""
    freeze = subparsers.add_parser(
        "freeze",
        help="stop changes of a server (or all) for a while",
        description="Freeze TARGET (or every server with --all) for DURATION: no change, "
        "automatic or approved, is applied until it expires or 'unfreeze' lifts it.",
    )
    _target(freeze)
    freeze.add_argument(
        "--for",
        dest="duration",
        metavar="DURATION",
        required=True,
        help="e.g. 30m, 2h, 1d (at most 7d)",
    )
    freeze.add_argument("--reason", required=True, help="why, for the log and the others")
    freeze.set_defaults(main=main_freeze)
    unfreeze = subparsers.add_parser(
        "unfreeze",
        help="lift a freeze",
        description="Lift the freeze of TARGET (or the global one with --all).",
    )
    _target(unfreeze)
    unfreeze.set_defaults(main=main_unfreeze)


def _target(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("target", nargs="?", metavar="TARGET", help="the vLLM instance's name")
    group.add_argument("--all", action="store_true", help="every server (a global freeze)")
    add_control_options(parser)


def main_freeze(args: argparse.Namespace) -> int:
    """Freeze, and say until when."""
    try:
        duration_s = parse_duration(args.duration)
    except ValueError as exc:
        print(f"vllm-governor: --for: {exc}", file=sys.stderr)
        return EXIT_USAGE
    target = "*" if args.all else args.target
    answer = ask(args, "freeze", target=target, duration_s=duration_s, reason=args.reason)
    if answer is None:
        return EXIT_FAILURE
    shown = "every server" if answer["target"] == "*" else answer["target"]
    print(f"frozen: {shown} until {answer['until']} ({answer['reason']})")
    return EXIT_OK


def main_unfreeze(args: argparse.Namespace) -> int:
    """Lift a freeze."""
    target = "*" if args.all else args.target
    answer = ask(args, "unfreeze", target=target)
    if answer is None:
        return EXIT_FAILURE
    shown = "every server" if answer["target"] == "*" else answer["target"]
    print(f"unfrozen: {shown}" if answer["lifted"] else f"{shown} was not frozen")
    return EXIT_OK
