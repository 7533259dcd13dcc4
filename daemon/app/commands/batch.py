"""``vllm-governor batch``: submit offline jobs in the OpenAI batch format, and follow them.

The daemon runs the jobs (``[batch]`` in config.toml): ``submit`` hands it a file, validated
whole before anything runs; ``status`` shows each job's progress and ETA; ``pause``,
``resume`` and ``cancel`` steer one. Results land beside the input: ``NAME.output.jsonl`` (the
2xx answers) and ``NAME.errors.jsonl`` (the rest), each custom_id exactly once across the two.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from daemon.app.commands.status import socket_of
from daemon.app.control_client import call_daemon, call_daemon_paged
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_FAILURE, EXIT_OK
from daemon.core.errors import ControlError

# Validating a 200 MB file takes the daemon a few seconds; the socket waits longer than that.
_SUBMIT_TIMEOUT_S = 120.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``batch`` subcommand and its own subcommands."""
    parser = subparsers.add_parser(
        "batch",
        help="run offline batch jobs (OpenAI batch format) through the governor",
        description="Offline batch jobs: one JSON request per line (custom_id, method, url, "
        "body), run by the daemon against a [[vllm]] target, each line's result written "
        "exactly once beside the input, across crashes and restarts.",
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)
    submit = actions.add_parser("submit", help="validate FILE and queue it as a job")
    submit.add_argument("file", type=Path, help="the input file (.jsonl)")
    submit.add_argument("--target", required=True, help="the [[vllm]] instance to send it to")
    submit.add_argument(
        "--deadline", help="ISO 8601 time with zone; lines not done by then are expired"
    )
    _common(submit)
    submit.set_defaults(main=main_submit)
    status = actions.add_parser("status", help="each job's progress and ETA")
    status.add_argument("job", nargs="?", help="one job (default: all)")
    status.add_argument("--json", action="store_true", help="print the raw JSON answer")
    _common(status)
    status.set_defaults(main=main_status)
    for name, verb in (
        ("pause", "stop sending (requests in flight are sent again on resume)"),
        ("resume", "queue a paused (or failed) job again"),
        ("cancel", "stop for good; lines not done are written as batch_cancelled"),
    ):
        action = actions.add_parser(name, help=verb)
        action.add_argument("job", help="the job's id (batch_...)")
        _common(action)
        action.set_defaults(main=main_steer, command=f"batch_{name}")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    parser.add_argument("--socket", type=Path, help="control socket (default: from the config)")


def main_submit(args: argparse.Namespace) -> int:
    """Submit one file."""
    arguments: dict[str, Any] = {"path": str(args.file.resolve()), "target": args.target}
    if args.deadline is not None:
        arguments["deadline"] = args.deadline.replace("Z", "+00:00")
    answer = _ask(args, "batch_submit", _SUBMIT_TIMEOUT_S, **arguments)
    if answer is None:
        return EXIT_FAILURE
    print(f"{answer['job']}: {answer['total']} requests queued for {answer['target']}")
    print(f"results: {answer['output']} and {answer['errors']}")
    return EXIT_OK


def main_status(args: argparse.Namespace) -> int:
    """Print each job's progress."""
    if args.job is None:
        answer = _ask_paged(args, "batch_status")
    else:
        answer = _ask(args, "batch_status", 10.0, job=args.job)
    if answer is None:
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(answer, indent=2))
        return EXIT_OK
    if not answer["jobs"]:
        print("no batch job")
    for row in answer["jobs"]:
        print(status_line(row))
    return EXIT_OK


def status_line(row: dict[str, Any]) -> str:
    """One job as a line: id, state, progress, ETA, its lane, target, and why it is so."""
    total, done = row["total"], row["done"]
    share = 100.0 * done / total if total else 100.0
    eta = "" if row["state"] != "running" else f", ETA {_duration(row['eta_s'])}"
    reason = f" ({row['reason']})" if row["reason"] else ""
    return (
        f"{row['job']} {row['state']}: {done}/{total} ({share:.0f}%), "
        f"{row['in_flight']} in flight{eta}{_lane(row)}, target {row['target']}{reason}"
    )


def _lane(row: dict[str, Any]) -> str:
    """The running job's lane: how wide, or closed and why (a closed lane sends nothing)."""
    lane = row.get("lane")
    if row["state"] != "running" or not isinstance(lane, dict):
        return ""
    if lane.get("width"):
        return f", lane {lane['width']} wide"
    return f", lane closed ({lane.get('reason', '')})"


def main_steer(args: argparse.Namespace) -> int:
    """Pause, resume or cancel one job."""
    answer = _ask(args, args.command, 10.0, job=args.job)
    if answer is None:
        return EXIT_FAILURE
    print(status_line(answer))
    return EXIT_OK


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _ask_paged(args: argparse.Namespace, command: str) -> Any:
    try:
        return call_daemon_paged(socket_of(args), command, "jobs")
    except ControlError as exc:
        print(f"vllm-governor: {exc}", file=sys.stderr)
        return None


def _ask(args: argparse.Namespace, command: str, timeout_s: float, **arguments: Any) -> Any:
    try:
        return call_daemon(socket_of(args), command, timeout_s, **arguments)
    except ControlError as exc:
        print(f"vllm-governor: {exc}", file=sys.stderr)
        return None
