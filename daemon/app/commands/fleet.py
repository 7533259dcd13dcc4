"""``vllm-governor fleet status|freeze|unfreeze``: the fleet as etcd holds it, straight from etcd.

Each action reads the ``[fleet]`` section of the configuration for where etcd is and under
which prefix. ``status`` lists every registered instance (host, instance, group, vLLM version,
health, knobs, the lease that keeps it), the fleet freezes in force, the restart slots held
and the group changes' rollouts (phase, canary, members done, who drives); a governor that is
down, or whose lease expired, is simply not listed. ``freeze`` writes the one key that holds
every change of every governor of the fleet (or of one group) until it expires or ``unfreeze``
lifts it. No daemon is needed for any of them.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import socket
import sys
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from daemon.app.config_broken import config_broken
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from daemon.core.errors import ConfigError
from daemon.core.fleet_settings import plain_name
from daemon.policy.durations import parse_duration

if TYPE_CHECKING:
    from daemon.fleet.etcd_gateway import EtcdGateway
    from daemon.fleet.keys import FleetKeys

T = TypeVar("T")

# As long as a local freeze may last: a forgotten freeze must end by itself.
MAX_FREEZE = timedelta(days=7)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``fleet`` subcommand and its actions."""
    parser = subparsers.add_parser(
        "fleet",
        help="the fleet of governors on etcd",
        description="The governors of many hosts, coordinated through etcd ([fleet] in "
        "config.toml).",
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)
    status = actions.add_parser(
        "status",
        help="every registered instance, the fleet freezes in force, the slots and rollouts",
    )
    status.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(main=main_status)
    freeze = actions.add_parser(
        "freeze",
        help="hold every change of every governor of the fleet (or of a group) for a while",
        description="Freeze the whole fleet, or one group with --group, for DURATION: no "
        "governor applies any change, automatic or approved, to an instance it covers until "
        "the freeze expires or 'fleet unfreeze' lifts it.",
    )
    _scope(freeze)
    freeze.add_argument(
        "--for",
        dest="duration",
        metavar="DURATION",
        required=True,
        help="e.g. 30m, 2h (at most 7d)",
    )
    freeze.add_argument("--reason", required=True, help="why, for every governor's refusals")
    freeze.set_defaults(main=main_freeze)
    unfreeze = actions.add_parser(
        "unfreeze", help="lift the fleet's freeze (or a group's)", description="Lift a freeze."
    )
    _scope(unfreeze)
    unfreeze.set_defaults(main=main_unfreeze)


def _scope(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", help="one group of replicas (default: the whole fleet)")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")


def main_status(args: argparse.Namespace) -> int:
    """Print the fleet."""
    from daemon.core.config_files import load_config
    from daemon.fleet.errors import FleetError
    from daemon.fleet.etcd_gateway import EtcdGateway
    from daemon.fleet.keys import FleetKeys
    from daemon.fleet.reading import read_fleet

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return config_broken(exc)
    section = config.fleet
    if not section.enabled:
        print(f"vllm-governor: [fleet] is not enabled in {args.config}", file=sys.stderr)
        return EXIT_FAILURE
    client = EtcdGateway(section.endpoints, section.request_timeout_s)
    try:
        reading = asyncio.run(read_fleet(client, FleetKeys(section.prefix)))
    except FleetError as exc:
        print(f"vllm-governor: the fleet cannot be read: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    answer = {
        "endpoints": list(section.endpoints),
        "prefix": section.prefix,
        **reading.as_json(datetime.now(UTC)),
    }
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        print("\n".join(render(answer)))
    return EXIT_OK


def render(answer: dict[str, Any]) -> list[str]:
    """The fleet for a terminal: a table of instances, then the freezes."""
    members = answer["members"]
    hosts = len({member["host"] for member in members})
    lines = [
        f"fleet {answer['prefix']} on {', '.join(answer['endpoints'])}: "
        f"{len(members)} instance(s) on {hosts} host(s)"
    ]
    if members:
        rows = [("HOST", "INSTANCE", "GROUP", "VERSION", "HEALTH", "LEASE", "KNOBS")]
        rows += [
            (
                m["host"],
                m["instance"],
                m["group"],
                m["vllm_version"] or "-",
                m["health"],
                m["lease"],
                " ".join(f"{k}={v:g}" for k, v in m["knobs"].items()) or "-",
            )
            for m in members
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        lines += [
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
            + "  "
            + row[-1]
            for row in rows
        ]
    freezes = answer["freezes"]
    if not freezes:
        lines.append("freezes: none")
    for freeze in freezes:
        scope = "the whole fleet" if freeze["group"] is None else f"group {freeze['group']}"
        by = f" (by {freeze['by']})" if freeze["by"] else ""
        lines.append(f"frozen: {scope} until {freeze['until']}: {freeze['reason']}{by}")
    lines += [
        f"restart slot {slot['slot']}: held by {slot['holder']} (lease {slot['lease']})"
        for slot in answer["slots"]
    ]
    lines += _rollout_lines(answer.get("rollouts", []))
    lines += [f"unreadable: {item['key']}: {item['why']}" for item in answer["unreadable"]]
    return lines


def _rollout_lines(rollouts: list[dict[str, Any]]) -> list[str]:
    """The group changes' rollouts: a table, then each one's last line."""
    if not rollouts:
        return ["rollouts: none"]
    header = ("GROUP", "POLICY", "PROPOSAL", "PHASE", "CANARY", "DONE", "DRIVER", "STARTED")
    rows = [(*header, "UPDATED")]
    for r in rollouts:
        done = len(r["members_done"])
        driver = r["driver"] or "-"
        rows.append(
            (
                r["group"],
                r["policy"],
                r["proposal"] or "-",
                r["phase"],
                r["canary"],
                f"{done}/{done + len(r['members_remaining'])}",
                driver if r["driving_now"] else f"({driver})",
                _seconds(r["started_at"]),
                _seconds(r["updated_at"]),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["rollouts:"]
    lines += [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        + "  "
        + row[-1]
        for row in rows
    ]
    for r in rollouts:
        remaining = ", ".join(r["members_remaining"]) or "none"
        lines.append(f"  {r['group']}/{r['policy']}: remaining {remaining}; last: {r['last']}")
    return lines


def _seconds(stamp: str | None) -> str:
    """An ISO 8601 time to the second, in UTC (the table's width); "-" when unknown."""
    if not stamp:
        return "-"
    return datetime.fromisoformat(stamp).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def main_freeze(args: argparse.Namespace) -> int:
    """Write the freeze, and say what it holds until when."""
    from daemon.fleet.freeze_writes import freeze

    try:
        duration_s = parse_duration(args.duration)
    except ValueError as exc:
        print(f"vllm-governor: --for: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not 0 < duration_s <= MAX_FREEZE.total_seconds():
        print("vllm-governor: --for: a freeze lasts at most 7d", file=sys.stderr)
        return EXIT_USAGE
    if not _plain_group(args.group):
        return EXIT_USAGE
    group: str | None = args.group
    until = datetime.now(UTC) + timedelta(seconds=duration_s)
    by = f"{getpass.getuser()}@{socket.gethostname()}"
    written = _in_fleet(
        args.config,
        lambda client, keys: freeze(
            client, keys, group=group, until=until, reason=args.reason, by=by
        ),
    )
    if written is None:
        return EXIT_FAILURE
    print(f"frozen: {_scope_text(group)} until {until.isoformat()} ({written.reason})")
    return EXIT_OK


def main_unfreeze(args: argparse.Namespace) -> int:
    """Lift the freeze."""
    from daemon.fleet.freeze_writes import unfreeze

    if not _plain_group(args.group):
        return EXIT_USAGE
    group: str | None = args.group
    lifted = _in_fleet(args.config, lambda client, keys: unfreeze(client, keys, group=group))
    if lifted is None:
        return EXIT_FAILURE
    scope = _scope_text(group)
    print(f"unfrozen: {scope}" if lifted else f"{scope} was not frozen")
    return EXIT_OK


def _plain_group(group: str | None) -> bool:
    """Whether ``--group`` may name a key (it becomes part of one); says why not."""
    if group is None or plain_name(group):
        return True
    print(f"vllm-governor: --group: {group!r} is not a plain name", file=sys.stderr)
    return False


def _scope_text(group: str | None) -> str:
    return "the whole fleet" if group is None else f"group {group}"


def _in_fleet(
    config_path: Path, call: Callable[[EtcdGateway, FleetKeys], Coroutine[Any, Any, T]]
) -> T | None:
    """``call`` against the configured fleet; None (having said why) when it cannot be done.

    Raises:
        ConfigError: the configuration is broken (the command line reports it).
    """
    from daemon.core.config_files import load_config
    from daemon.fleet.errors import FleetError
    from daemon.fleet.etcd_gateway import EtcdGateway
    from daemon.fleet.keys import FleetKeys

    section = load_config(config_path).fleet
    if not section.enabled:
        print(f"vllm-governor: [fleet] is not enabled in {config_path}", file=sys.stderr)
        return None
    client = EtcdGateway(section.endpoints, section.request_timeout_s)
    try:
        return asyncio.run(call(client, FleetKeys(section.prefix)))
    except FleetError as exc:
        # An unanswered write is unknown, not undone: etcd may commit it once it has a majority.
        print(
            f"vllm-governor: the fleet cannot be written: {exc} (the change may still take "
            "effect once etcd answers: check with 'vllm-governor fleet status')",
            file=sys.stderr,
        )
        return None
