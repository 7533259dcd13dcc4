"""``vllm-governor signals``: what the governor sees, with the age and state of every value.

From the running daemon when there is one; otherwise from a one-off collection of the
configured sources over ``--window`` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.app.control_client import call_daemon
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_CONFIG, EXIT_FAILURE, EXIT_OK
from daemon.core.clock import SystemClock
from daemon.core.errors import ConfigError, ControlError, DaemonNotRunningError

if TYPE_CHECKING:
    from daemon.core.settings import GovernorConfig


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``signals`` subcommand."""
    parser = subparsers.add_parser(
        "signals",
        help="show every signal the governor sees, with its age and state",
        description="Print every signal: value, age, and state (ok, stale, no_data), and the "
        "state of each source. Asks the running daemon; without one, collects from the "
        "configured sources for --window seconds.",
    )
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    parser.add_argument("--socket", type=Path, help="control socket (default: from the config)")
    parser.add_argument("--prefix", default="", help="only signals whose name starts with this")
    parser.add_argument(
        "--window", type=float, default=5.0, help="seconds of one-off collection (default 5)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Print the signals."""
    from daemon.core.config_files import load_config
    from daemon.engine.evaluation.one_off import collect_once

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for issue in exc.issues:
            print(issue.render(), file=sys.stderr)
        return EXIT_CONFIG
    try:
        answer = _ask_daemon(config, args)
    except DaemonNotRunningError:
        print(f"no daemon running; collecting for {args.window:g} s", file=sys.stderr)
        rows, sources = asyncio.run(collect_once(config, SystemClock(), args.window))
        answer = {
            "signals": [row.as_json() for row in rows if row.name.startswith(args.prefix)],
            "sources": sources,
        }
    except ControlError as exc:
        print(f"vllm-governor: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        _print_table(answer)
    return EXIT_OK


def _ask_daemon(config: GovernorConfig, args: argparse.Namespace) -> dict[str, Any]:
    socket_path = args.socket or config.control.socket_path
    answer: dict[str, Any] = call_daemon(socket_path, "signals", prefix=args.prefix)
    return answer


def _print_table(answer: dict[str, Any]) -> None:
    for source in answer["sources"]:
        detail = f" ({source['detail']})" if source["detail"] else ""
        error = f": {source['last_error']}" if source["last_error"] else ""
        print(
            f"source {source['source']}: {source['state']}{detail} for {source['for_s']} s{error}"
        )
    for row in answer["signals"]:
        labels = ",".join(f"{k}={v}" for k, v in row["labels"].items())
        where = f"{row['target']} " if row["target"] else ""
        value = "-" if row["value"] is None else f"{row['value']:g}"
        age = "" if row["age_s"] is None else f", age {row['age_s']:.1f}s"
        source = f" from {row['source']}" if row["source"] else ""
        print(f"{where}{row['name']}{{{labels}}} {value} [{row['state']}{age}]{source}")
