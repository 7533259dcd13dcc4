"""``vllm-governor proposals``, ``approve ID`` and ``reject ID``: decide without Slack.

They talk to the running daemon over its control socket, which only the governor's user and
root may open; the daemon names the approver after the local user (``unix:LOGIN``) and judges
the click exactly as it judges a Slack button: allow-list, expiry, single use, and a re-check of
the condition, the knob's current value, newer proposals and freezes.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from daemon.app.commands.control_command import add_control_options, ask, show_answer
from daemon.app.commands.forecast_lines import forecast_lines
from daemon.app.defaults import EXIT_FAILURE, EXIT_OK, EXIT_REFUSED

UNKNOWN = "unknown"  # the state the daemon answers for an id it does not know


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``proposals``, ``approve`` and ``reject`` subcommands."""
    listing = subparsers.add_parser(
        "proposals",
        help="list changes waiting for approval, and the latest decided ones",
        description="List the proposals waiting for a decision (oldest first), then the 20 "
        "most recently decided, with their change, reason, expiry and votes.",
    )
    add_control_options(listing)
    listing.add_argument("--json", action="store_true", help="print the raw JSON answer")
    listing.set_defaults(main=main_list)
    approve = subparsers.add_parser(
        "approve",
        help="approve a proposal as the local user",
        description="Approve proposal ID. The governor re-checks it now and applies it through "
        "the actuator's usual checks; you must be on the allow-list as unix:LOGIN.",
    )
    approve.add_argument(
        "id", metavar="ID", help="the proposal's id (see 'vllm-governor proposals')"
    )
    add_control_options(approve)
    approve.set_defaults(main=main_approve)
    reject = subparsers.add_parser(
        "reject",
        help="reject a proposal as the local user",
        description="Reject proposal ID; nothing is changed.",
    )
    reject.add_argument(
        "id", metavar="ID", help="the proposal's id (see 'vllm-governor proposals')"
    )
    reject.add_argument("--reason", default="", help="why, kept with the decision")
    add_control_options(reject)
    reject.set_defaults(main=main_reject)


def main_list(args: argparse.Namespace) -> int:
    """Print the proposals."""
    return show_answer(args, ask(args, "proposals"), lambda answer: render(answer["proposals"]))


def main_approve(args: argparse.Namespace) -> int:
    """Approve one proposal and say what came of it."""
    return _decided(ask(args, "approve", id=args.id))


def main_reject(args: argparse.Namespace) -> int:
    """Reject one proposal and say what came of it."""
    return _decided(ask(args, "reject", id=args.id, reason=args.reason))


def _decided(answer: dict[str, Any] | None) -> int:
    if answer is None:
        return EXIT_FAILURE
    if answer["state"] == UNKNOWN:
        # A mistyped id is an error of the command, not a refusal of a proposal.
        print(
            f"vllm-governor: no proposal {answer['id']!r} (list them with "
            "'vllm-governor proposals')",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    verdict = "accepted" if answer["accepted"] else "refused"
    print(f"proposal {answer['id']}: {verdict}, now {answer['state']}: {answer['reason']}")
    return EXIT_OK if answer["accepted"] else EXIT_REFUSED


def render(proposals: list[dict[str, Any]]) -> str:
    """The proposals for a terminal."""
    if not proposals:
        return "no proposals"
    lines = []
    for proposal in proposals:
        changes = ", ".join(
            f"{knob} {change['old']:g} -> {change['new']:g}"
            for knob, change in proposal["changes"].items()
        )
        lines.append(
            f"{proposal['id']}  {proposal['state']:<16} {proposal['target']}: "
            f"{changes or proposal.get('operation') or '-'}  ({proposal['policy']})"
        )
        if proposal["state"] == "pending":
            lines.append(f"    expires {proposal['expires_at']}; why: {proposal['reason']}")
        else:
            lines.append(f"    {proposal['reason']}")
        lines.extend(forecast_lines(proposal.get("forecast")))
        for vote in proposal["votes"]:
            lines.append(
                f"    {vote['action']} by {vote['user']} via {vote['via']} at {vote['at']}"
            )
    return "\n".join(lines)
