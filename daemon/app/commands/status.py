"""``vllm-governor status``: what the running daemon is doing."""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon.app.commands.forecast_lines import forecast_lines
from daemon.app.commands.freeze_listing import freeze_lines, pending_lines, reload_line
from daemon.app.commands.gate_status import gate_lines
from daemon.app.control_client import answer_or_say_why
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_FAILURE, EXIT_OK
from daemon.core.actuation import OPEN


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``status`` subcommand."""
    parser = subparsers.add_parser(
        "status",
        help="ask the running daemon for its status",
        description="Ask the running governor, over its control socket, what it is doing: "
        "sources and their freshness, each policy's state (a pending one with when it will "
        "act), disabled policy files, the latest refused reload, freezes, quarantines, "
        "proposals awaiting a decision, the latest decisions.",
    )
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    parser.add_argument("--socket", type=Path, help="control socket (default: from the config)")
    parser.add_argument("--json", action="store_true", help="print the raw JSON answer")
    parser.set_defaults(main=main)


def socket_of(args: argparse.Namespace) -> Path:
    """The control socket: ``--socket``, or the one the configuration names.

    Raises:
        ConfigError: The configuration is needed and broken (the command line exits 78).
    """
    if args.socket is not None:
        path: Path = args.socket
        return path
    from daemon.core.config_files import load_config

    return load_config(args.config).control.socket_path


def main(args: argparse.Namespace) -> int:
    """Print the daemon's status, or say clearly that no daemon runs."""
    status = answer_or_say_why(socket_of(args), "status")
    if status is None:
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print(render(status))
    return EXIT_OK


def render(status: dict[str, Any]) -> str:
    """The status for a terminal."""
    lines = [
        f"governor {status['version']} (pid {status['pid']}): {status['state']}, "
        f"up {status['uptime_s']:.0f} s, config {status['config_path']}"
    ]
    lines.extend(reload_line(status))
    if freezes := status.get("freezes"):
        lines.append("frozen (no change is applied):")
        lines.extend(freeze_lines(freezes))
    if fleet := status.get("fleet"):
        lines.append(fleet_line(fleet))
    lines.append("sources:")
    for source in status.get("sources", []):
        detail = f" ({source['detail']})" if source["detail"] else ""
        error = f": {source['last_error']}" if source["last_error"] else ""
        lines.append(
            f"  {source['source']:<16} {source['state']}{detail} for {source['for_s']} s{error}"
        )
    lines.append("policies:")
    for policy in status.get("policies", []):
        mode = " [shadow]" if policy["mode"] == "shadow" else ""
        targets = policy["targets"] or {"-": {"phase": "not evaluated yet"}}
        for target, state in targets.items():
            extra = ""
            if state.get("since"):
                extra += f" since {_time(state['since'])}"
            if state.get("blocked_by"):
                extra += f", blocked by {state['blocked_by']}"
            shown = state["phase"]
            if state.get("error"):
                shown, extra = "error", f" (holding {state['phase']}): {state['error']}"
            lines.append(f"  {policy['name']:<24} {target:<10} {shown}{extra}{mode}")
    for problem in status.get("disabled", []):
        lines.append(f"  disabled: {problem}")
    if pending := pending_lines(status.get("policies", []), time.time()):
        lines.append("pending:")
        lines.extend(pending)
    decisions = status.get("recent_decisions", [])
    if decisions:
        lines.append("recent decisions:")
        for decision in decisions[:10]:
            guard = f" ({decision['guard']})" if decision["guard"] else ""
            lines.append(
                f"  {_time(decision['at'])} {decision['policy']} on {decision['target']}: "
                f"{decision['kind']}{guard}"
            )
    lines.extend(gate_lines(status))
    lines.extend(lane_lines(status))
    lines.extend(_changes(status))
    return "\n".join(lines)


def lane_lines(status: dict[str, Any]) -> list[str]:
    """The batch lanes a policy steers or that carry requests (the others say nothing)."""
    lanes = status.get("batch_lanes") or {}
    shown = {t: lane for t, lane in lanes.items() if lane.get("policy") or lane.get("in_flight")}
    if not shown:
        return []
    lines = ["batch lanes:"]
    for target, lane in sorted(shown.items()):
        width = f"{lane['width']} wide" if lane["width"] else "closed"
        priority = f"priority {lane['priority']}" if lane.get("priority") else "no priority"
        lines.append(
            f"  {target:<10} {width}, {lane['in_flight']} in flight, {priority}: {lane['reason']}"
        )
    return lines


def _changes(status: dict[str, Any]) -> list[str]:
    """Recent changes of vLLM servers, quarantined policies, proposals awaiting a person."""
    lines = []
    if changes := status.get("actuations", []):
        lines.append("recent changes:")
        for change in changes:
            # An open change says where it is; a finished one, how it ended.
            where = f"at step {change['step']}" if change["state"] == OPEN else change["outcome"]
            lines.append(
                f"  #{change['id']} {change['policy']} on {change['target']}: "
                f"{change['state']}: {where}"
            )
            # A tuned change says what it was predicted to buy, as its proposal did.
            lines.extend(forecast_lines(change.get("forecast")))
    if waiting := status.get("reconciles_deferred", []):
        lines.append("changes left open, their reconcile deferred (tried again on a schedule):")
        for deferral in waiting:
            lines.append(
                f"  #{deferral['entry']} on {deferral['target']}: {deferral['tries']} tr"
                f"{'y' if deferral['tries'] == 1 else 'ies'} deferred, next at "
                f"{_iso_time(deferral['next_at'])}: {deferral['reason']}"
            )
    if held_ones := status.get("quarantined", []):
        lines.append("quarantined (lift with 'vllm-governor unquarantine'):")
        for held in held_ones:
            lines.append(f"  {held['policy']} on {held['target']}: {held['reason']}")
    if proposals := status.get("proposals", []):
        lines.append("awaiting a decision ('vllm-governor approve ID' or 'reject ID'):")
        for proposal in proposals:
            lines.append(
                f"  #{proposal['id']} {proposal['policy']} on {proposal['target']}: "
                f"{proposal['changes']}"
            )
    return lines


def _time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso_time(text: str) -> str:
    return datetime.fromisoformat(text).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def fleet_line(fleet: dict[str, Any]) -> str:
    """This governor in its fleet: registered or not, and whether it sees the fleet's state."""
    if fleet["registered"]:
        registered = f"registered (lease {fleet['lease']})"
    else:
        registered = f"not registered ({fleet['registration_error'] or 'not yet'})"
    watch = fleet["freeze_watch"]
    if watch["seen"]:
        seen = f"fleet seen (read {watch['last_read']}, {watch['freezes']} freeze record(s))"
    else:
        seen = f"fleet NOT seen, no restarts (read {watch['last_read']}: {watch['error']})"
    return f"fleet: {fleet['host']} on {', '.join(fleet['endpoints'])}: {registered}; {seen}"
