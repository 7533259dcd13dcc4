"""``vllm-governor quarantine`` and ``unquarantine``: see and lift quarantined policies.

A policy whose change had to be reverted is quarantined on that server: it may not act there
again until a person lifts the quarantine, with a reason. The lift is audited in the journal
(who, when, why) and announced on MQTT where it is configured.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from daemon.app.commands.status import socket_of
from daemon.app.control_client import answer_or_say_why
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_FAILURE, EXIT_OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``quarantine`` and ``unquarantine`` subcommands."""
    listing = subparsers.add_parser(
        "quarantine",
        help="list policies quarantined after a reverted change",
        description="List each policy quarantined on a server (its change there was reverted), "
        "and the quarantines people lifted.",
    )
    _common(listing)
    listing.add_argument("--json", action="store_true", help="print the raw JSON answer")
    listing.set_defaults(main=main_list)
    lift = subparsers.add_parser(
        "unquarantine",
        help="let a quarantined policy act on a server again",
        description="Lift the quarantine of POLICY on TARGET. The reason is kept in the journal "
        "with your user name.",
    )
    lift.add_argument("policy", help="the policy's name")
    lift.add_argument("target", help="the server (target) it is quarantined on")
    lift.add_argument("--reason", required=True, help="why it is safe again (audited)")
    _common(lift)
    lift.set_defaults(main=main_lift)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    parser.add_argument("--socket", type=Path, help="control socket (default: from the config)")


def main_list(args: argparse.Namespace) -> int:
    """Print the quarantined pairs, then the lifted ones."""
    answer = _ask(args, "quarantine")
    if answer is None:
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(answer, indent=2))
        return EXIT_OK
    if not answer["quarantined"]:
        print("no policy is quarantined")
    for row in answer["quarantined"]:
        change = f" (change #{row['actuation']})" if row["actuation"] is not None else ""
        print(f"{row['policy']} on {row['target']} since {row['since']}{change}: {row['reason']}")
    for row in answer["lifted"][:10]:
        print(
            f"lifted: {row['policy']} on {row['target']} at {row['lifted_at']} "
            f"by {row['lifted_by']}: {row['why']}"
        )
    return EXIT_OK


def main_lift(args: argparse.Namespace) -> int:
    """Lift one quarantine."""
    answer = _ask(args, "unquarantine", policy=args.policy, target=args.target, reason=args.reason)
    if answer is None:
        return EXIT_FAILURE
    print(f"lifted: {answer['policy']} may act on {answer['target']} again")
    return EXIT_OK


def _ask(args: argparse.Namespace, command: str, **arguments: Any) -> Any:
    return answer_or_say_why(socket_of(args), command, **arguments)
