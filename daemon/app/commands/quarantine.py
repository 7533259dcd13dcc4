"""``vllm-governor quarantine`` and ``unquarantine``: see and lift quarantined policies.

A policy whose change had to be reverted is quarantined on that server: it may not act there
again until a person lifts the quarantine, with a reason. The lift is audited in the journal
(who, when, why) and announced on MQTT where it is configured.
"""

from __future__ import annotations

import argparse
from typing import Any

from daemon.app.commands.control_command import add_control_options, ask, show_answer
from daemon.app.defaults import EXIT_FAILURE, EXIT_OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``quarantine`` and ``unquarantine`` subcommands."""
    listing = subparsers.add_parser(
        "quarantine",
        help="list policies quarantined after a reverted change",
        description="List each policy quarantined on a server (its change there was reverted), "
        "and the quarantines people lifted.",
    )
    add_control_options(listing)
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
    add_control_options(lift)
    lift.set_defaults(main=main_lift)


def main_list(args: argparse.Namespace) -> int:
    """Print the quarantined pairs, then the lifted ones."""
    return show_answer(args, ask(args, "quarantine"), render)


def main_lift(args: argparse.Namespace) -> int:
    """Lift one quarantine."""
    answer = ask(args, "unquarantine", policy=args.policy, target=args.target, reason=args.reason)
    if answer is None:
        return EXIT_FAILURE
    print(f"lifted: {answer['policy']} may act on {answer['target']} again")
    return EXIT_OK


def render(answer: dict[str, Any]) -> str:
    """The quarantined pairs, then up to ten lifted ones, for a terminal."""
    lines = [] if answer["quarantined"] else ["no policy is quarantined"]
    for row in answer["quarantined"]:
        change = f" (change #{row['actuation']})" if row["actuation"] is not None else ""
        lines.append(
            f"{row['policy']} on {row['target']} since {row['since']}{change}: {row['reason']}"
        )
    lines.extend(
        f"lifted: {row['policy']} on {row['target']} at {row['lifted_at']} "
        f"by {row['lifted_by']}: {row['why']}"
        for row in answer["lifted"][:10]
    )
    return "\n".join(lines)
