"""What the commands that ask the running daemon share: their options, their call, ``--json``.

Such a command finds the control socket from ``--socket`` or the configuration
(:func:`~daemon.app.commands.status.socket_of`); when the daemon does not answer it has already
said why on stderr and exits 1; with ``--json`` it prints the daemon's answer as it came, and
otherwise its own rendering of it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon.app.commands.status import socket_of
from daemon.app.control_client import answer_or_say_why
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_FAILURE, EXIT_OK


def add_control_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--config`` and ``--socket``, the two ways :func:`ask` finds the daemon."""
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    parser.add_argument("--socket", type=Path, help="control socket (default: from the config)")


def ask(args: argparse.Namespace, command: str, **arguments: Any) -> Any:
    """Send ``command`` to the daemon; None (after saying why on stderr) when it failed."""
    return answer_or_say_why(socket_of(args), command, **arguments)


def show_answer(args: argparse.Namespace, answer: Any, render: Callable[[Any], str]) -> int:
    """Print ``answer`` as JSON with ``--json``, else as ``render`` writes it; the exit code.

    A None answer (the daemon did not answer, and the user was told why) prints nothing and
    fails.
    """
    if answer is None:
        return EXIT_FAILURE
    print(json.dumps(answer, indent=2) if args.json else render(answer))
    return EXIT_OK
