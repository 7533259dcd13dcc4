"""``vllm-governor explain POLICY``: each condition's value now, and what would happen."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from daemon.app.commands.status import socket_of
from daemon.app.control_client import answer_or_say_why
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_CONFIG, EXIT_FAILURE, EXIT_OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``explain`` subcommand."""
    parser = subparsers.add_parser(
        "explain",
        help="show why a policy is (not) firing and what it would do",
        description="For the current signals, show a policy's condition, the value of each "
        "signal it reads, how long it has held, and what the next evaluation would decide.",
    )
    parser.add_argument("policy", help="the policy's name")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    parser.add_argument("--socket", type=Path, help="control socket (default: from the config)")
    parser.add_argument("--json", action="store_true", help="print the raw JSON answer")
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Ask the daemon and print its explanation."""
    socket_path = socket_of(args)
    if socket_path is None:
        return EXIT_CONFIG
    answer = answer_or_say_why(socket_path, "explain", policy=args.policy)
    if answer is None:
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(answer, indent=2))
        return EXIT_OK
    print(f"{answer['policy']}: {answer['description']}")
    for target, view in answer["targets"].items():
        print(f"  target {target}: {view['phase']} -> {view['next_phase']}")
        print(f"    when: {view['condition']}  (for {view['for_s']:g} s)")
        if "result" in view:
            print(f"    now: {view['result']}")
        if view.get("error"):
            print(f"    error: {view['error']} (the policy holds until it evaluates again)")
        for name, value in view["signals"].items():
            shown = "no data" if value is None else value
            print(f"      {name} = {shown}")
        if view["held_for_s"] is not None:
            print(f"    in this phase for {view['held_for_s']} s")
        for would in view["would"] or [{"kind": "nothing", "guard": None, "intent": None}]:
            guard = f" (blocked by {would['guard']})" if would["guard"] else ""
            intent = f": {would['intent']['changes']}" if would["intent"] else ""
            print(f"    would: {would['kind']}{guard}{intent}")
    return EXIT_OK
