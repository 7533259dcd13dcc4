"""``vllm-governor signals``: what the governor sees, with the age and state of every value.

From the running daemon when there is one; otherwise from a one-off collection of the
configured sources over ``--window`` seconds, whose rates and quantiles cover the span collected
(the daemon's ``signals.window_s`` is far longer than a few seconds of scrapes): the output says
which window it used, as a note in the table and as ``window_s`` in the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.app.commands.signal_table import signal_units, table_lines
from daemon.app.config_broken import config_broken
from daemon.app.control_client import call_daemon_paged
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_FAILURE, EXIT_OK
from daemon.app.logging_setup import describe, records_kept
from daemon.core.clock import SystemClock
from daemon.core.errors import ConfigError, ControlError, DaemonNotRunningError

if TYPE_CHECKING:
    from daemon.core.settings import GovernorConfig

# The logger of the sources' state changes (up, down), which the table shows with their errors.
_SOURCE_HEALTH = "daemon.sources.health"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``signals`` subcommand."""
    parser = subparsers.add_parser(
        "signals",
        help="show every signal the governor sees, with its age and state",
        description="Print the state of each source, then every signal in a table grouped by "
        "target and source: value in its unit, age, and state (ok, stale, no_data). Asks "
        "the running daemon; without one, collects from the configured sources for --window "
        "seconds and computes rates and quantiles over what it collected.",
    )
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    parser.add_argument("--socket", type=Path, help="control socket (default: from the config)")
    parser.add_argument("--prefix", default="", help="only signals whose name starts with this")
    parser.add_argument(
        "--window",
        type=float,
        default=5.0,
        help="seconds of one-off collection without a daemon, which rates and quantiles then "
        "cover (default 5)",
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
        return config_broken(exc)
    notes: list[str] = []
    try:
        answer = _ask_daemon(config, args)
    except DaemonNotRunningError:
        print(f"no daemon running; collecting for {args.window:g} s", file=sys.stderr)
        with records_kept() as records:
            look = asyncio.run(collect_once(config, SystemClock(), args.window))
        # A source's state and error are in the table already; other warnings become notes.
        notes = [describe(r) for r in records if not r.name.startswith(_SOURCE_HEALTH)]
        notes.insert(0, _window_note(look.window_s, config.signals.window_s))
        answer = {
            "signals": [row.as_json() for row in look.rows if row.name.startswith(args.prefix)],
            "sources": look.sources,
            "window_s": round(look.window_s, 2),
        }
    except ControlError as exc:
        print(f"vllm-governor: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(answer, indent=2))
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    else:
        print("\n".join(table_lines(answer, signal_units(config), notes)))
    return EXIT_OK


def _window_note(used_s: float, configured_s: float) -> str:
    return (
        f"no daemon: rates and quantiles cover the {used_s:.1f} s collected here, not "
        f"signals.window_s ({configured_s:g} s); --window collects longer"
    )


def _ask_daemon(config: GovernorConfig, args: argparse.Namespace) -> dict[str, Any]:
    socket_path = args.socket or config.control.socket_path
    return call_daemon_paged(socket_path, "signals", "signals", prefix=args.prefix)
