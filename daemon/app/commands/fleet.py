"""``vllm-governor fleet status``: the fleet as etcd holds it, straight from etcd.

Reads the ``[fleet]`` section of the configuration for where etcd is and under which prefix,
then lists every registered instance (host, instance, group, vLLM version, health, knobs, the
lease that keeps it) and the fleet freezes in force. No daemon is needed: a governor that is
down, or whose lease expired, is simply not listed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon.app.config_broken import config_broken
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_FAILURE, EXIT_OK
from daemon.core.errors import ConfigError


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
        "status", help="every registered instance and the fleet freezes in force"
    )
    status.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(main=main_status)


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
    lines += [f"unreadable: {item['key']}: {item['why']}" for item in answer["unreadable"]]
    return lines
