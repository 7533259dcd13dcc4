"""``vllm-governor status``: what the running daemon is doing."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from daemon.app.control_client import call_daemon
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_CONFIG, EXIT_FAILURE, EXIT_OK
from daemon.core.config_files import load_config
from daemon.core.errors import ConfigError, ControlError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``status`` subcommand."""
    parser = subparsers.add_parser(
        "status",
        help="ask the running daemon for its status",
        description="Ask the running governor, over its control socket, what it is doing.",
    )
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    parser.add_argument("--socket", type=Path, help="control socket (default: from the config)")
    parser.add_argument("--json", action="store_true", help="print the raw JSON answer")
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Print the daemon's status, or say clearly that no daemon runs."""
    socket_path = args.socket
    if socket_path is None:
        try:
            socket_path = load_config(args.config).control.socket_path
        except ConfigError as exc:
            for issue in exc.issues:
                print(issue.render(), file=sys.stderr)
            return EXIT_CONFIG
    try:
        status = call_daemon(socket_path, "status")
    except ControlError as exc:
        print(f"vllm-governor: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        for key, value in status.items():
            print(f"{key:>18}: {value}")
    return EXIT_OK
