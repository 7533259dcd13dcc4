"""``vllm-governor signals``: what the running daemon sees, with the age of every value."""

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
    """Add the ``signals`` subcommand."""
    parser = subparsers.add_parser(
        "signals",
        help="show the latest value and freshness of every signal",
        description="Ask the running governor for every signal it holds: value, age, and "
        "whether it is fresh, stale or missing; and the state of each source.",
    )
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    parser.add_argument("--socket", type=Path, help="control socket (default: from the config)")
    parser.add_argument("--prefix", default="", help="only signals whose name starts with this")
    parser.add_argument("--json", action="store_true", help="print the raw JSON answer")
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Print the signals table."""
    socket_path = args.socket
    if socket_path is None:
        try:
            socket_path = load_config(args.config).control.socket_path
        except ConfigError as exc:
            for issue in exc.issues:
                print(issue.render(), file=sys.stderr)
            return EXIT_CONFIG
    try:
        answer = call_daemon(socket_path, "signals", prefix=args.prefix)
    except ControlError as exc:
        print(f"vllm-governor: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(answer, indent=2))
        return EXIT_OK
    for source in answer["sources"]:
        detail = f" ({source['detail']})" if source["detail"] else ""
        error = f": {source['last_error']}" if source["last_error"] else ""
        print(
            f"source {source['source']}: {source['state']}{detail} for {source['for_s']} s{error}"
        )
    for row in answer["signals"]:
        labels = ",".join(f"{k}={v}" for k, v in row["labels"].items())
        value = "-" if row["value"] is None else f"{row['value']:g}"
        age = "-" if row["age_s"] is None else f"{row['age_s']:.1f}s"
        print(f"{row['name']}{{{labels}}} {value} [{row['freshness']}, age {age}]")
    return EXIT_OK
