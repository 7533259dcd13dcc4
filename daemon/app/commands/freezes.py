"""``vllm-governor freezes``: the freezes in force, from the daemon or straight from the files.

A freeze is a file in the state directory (see :mod:`daemon.core.freezes`), so the list does
not need the daemon: when none answers on the control socket, the files of the configured
``state_dir`` are read here. The output says which of the two it came from.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon.app.commands.freeze_listing import freeze_lines
from daemon.app.config_broken import config_broken
from daemon.app.control_client import call_daemon
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_FAILURE, EXIT_OK
from daemon.core.errors import ConfigError, ControlError, DaemonNotRunningError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``freezes`` subcommand."""
    parser = subparsers.add_parser(
        "freezes",
        help="list the freezes in force",
        description="List every freeze in force: target, until when, why, by whom, and its "
        "file. Asks the running daemon; without one, reads the freeze files of the configured "
        "state_dir.",
    )
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    parser.add_argument("--socket", type=Path, help="control socket (default: from the config)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Print the freezes, and where they were read."""
    from daemon.core.config_files import load_config
    from daemon.core.freezes import freezes_in_force

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return config_broken(exc)
    socket_path = args.socket or config.control.socket_path
    try:
        status = call_daemon(socket_path, "status")
        answer: dict[str, Any] = {
            "from": "daemon",
            "pid": status["pid"],
            "freezes": status.get("freezes", []),
        }
    except DaemonNotRunningError:
        state_dir = config.governor.state_dir
        found = freezes_in_force(state_dir, datetime.now(UTC))
        answer = {
            "from": "files",
            "state_dir": str(state_dir),
            "freezes": [freeze.as_json() for freeze in found],
        }
    except ControlError as exc:
        print(f"vllm-governor: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        print("\n".join(render(answer)))
    return EXIT_OK


def render(answer: dict[str, Any]) -> list[str]:
    """The freezes for a terminal, headed by where they were read."""
    if answer["from"] == "daemon":
        where = f"from the running daemon (pid {answer['pid']})"
    else:
        where = f"no daemon running; read from the freeze files in {answer['state_dir']}"
    if not answer["freezes"]:
        return [f"no freeze in force ({where})"]
    return [f"freezes in force ({where}):", *freeze_lines(answer["freezes"])]
