"""``vllm-governor apply --dry-run``: exactly what a change would write and restart, nothing more.

Two ways to name the change:

* ``--policy NAME`` asks the running daemon what the policy would change on each of its servers
  if it acted now (its condition on the live signals, the current knob values, the envelopes),
  and has the actuator plan and preflight each change without side effects;
* ``--instance NAME --set KNOB=VALUE`` plans a change given by hand, here, from the files
  (budgets and dwell times, which live in the daemon's journal, are the daemon's to check).

Changes themselves are made by the daemon, from policies; this command only shows them. A
refused change lists every check that refused it, one sentence each, and the command exits 1
(``EXIT_REFUSED``), so that a script never takes a refusal for a plan.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from daemon.app.commands.status import socket_of
from daemon.app.config_broken import config_broken
from daemon.app.control_client import call_daemon
from daemon.app.defaults import (
    DEFAULT_CONFIG,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
)
from daemon.core.actuation import DRY_RUN, REFUSED
from daemon.core.errors import ConfigError, ControlError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``apply`` subcommand."""
    parser = subparsers.add_parser(
        "apply",
        help="show what a change would write and restart (--dry-run)",
        description="Plan a change of a vLLM server and show the file diffs and the restart "
        "command, with every preflight check, without touching anything. Exits 0 when every "
        "change would go ahead, 1 when one is refused (each failed check is listed) or the "
        "daemon cannot be asked, 2 on a usage error, 78 when the configuration is broken.",
    )
    parser.add_argument("--dry-run", action="store_true", help="plan only (required)")
    parser.add_argument("--policy", help="what this policy would change now (asks the daemon)")
    parser.add_argument("--instance", help="the vLLM instance of a change given with --set")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KNOB=VALUE", help="a knob's new value"
    )
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    parser.add_argument("--socket", type=Path, help="control socket (default: from the config)")
    parser.add_argument("--json", action="store_true", help="print the plans as JSON")
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Plan, print, touch nothing."""
    if not args.dry_run:
        print(
            "vllm-governor: only --dry-run is supported: the daemon makes changes, from policies",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if (args.policy is None) == (args.instance is None):
        print("vllm-governor: give either --policy or --instance with --set", file=sys.stderr)
        return EXIT_USAGE
    try:
        plans = _from_daemon(args) if args.policy is not None else _by_hand(args)
    except (ControlError, ValueError) as exc:
        print(f"vllm-governor: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except ConfigError as exc:
        return config_broken(exc)
    if args.json:
        print(json.dumps(plans, indent=2))
    else:
        _print(plans)
    return EXIT_REFUSED if any(map(_refused, plans)) else EXIT_OK


def _from_daemon(args: argparse.Namespace) -> list[dict[str, Any]]:
    answer = call_daemon(socket_of(args), "plan", timeout_s=60.0, policy=args.policy)
    plans: list[dict[str, Any]] = answer["plans"]
    if not plans:
        print(f"{args.policy}: its condition does not hold anywhere now: nothing to change")
    return plans


def _by_hand(args: argparse.Namespace) -> list[dict[str, Any]]:
    from actuators.vllm.actuator import VllmActuator
    from daemon.core.actuation import ChangeRequest
    from daemon.core.clock import SystemClock
    from daemon.core.config_files import load_config
    from daemon.core.freeze_sources import NO_FREEZE_SOURCE, FreezeSource
    from daemon.engine.storage.journal_store import SqliteJournal
    from daemon.fleet.freeze_watch import freezes_now

    config = load_config(args.config)
    instance = next((v for v in config.vllm if v.name == args.instance), None)
    if instance is None:
        names = ", ".join(v.name for v in config.vllm) or "none"
        message = f"no [[vllm]] instance named {args.instance!r} (configured: {names})"
        raise ValueError(message)
    changes = dict(_assignment(text) for text in args.set)
    if not changes:
        message = "give at least one --set KNOB=VALUE"
        raise ValueError(message)
    clock = SystemClock()
    # A throw-away journal: a dry run by hand must not need write access to the daemon's.
    journal = SqliteJournal(Path(":memory:"), clock)
    # In a fleet, the fleet's freeze as etcd holds it now (unknown when etcd cannot be read).
    fleet_freeze: FreezeSource = NO_FREEZE_SOURCE
    if config.fleet.enabled:
        fleet_freeze = asyncio.run(freezes_now(config.fleet, clock))
    actuator = VllmActuator(
        journal, _NoSignals(), clock, config.governor.state_dir, fleet_freeze=fleet_freeze
    )
    current = actuator.current_knobs(instance)
    request = ChangeRequest(
        target=instance.name,
        policy="by hand",
        changes=changes,
        current={knob: current[knob] for knob in changes if knob in current},
        reason="given on the command line",
    )
    result = asyncio.run(actuator.apply(instance, request, dry_run=True))
    journal.close()
    return [
        {"target": result.target, "state": result.state, "outcome": result.outcome,
         "refusals": [list(refusal) for refusal in result.refusals], "plan": dict(result.plan)}
    ]  # fmt: skip


def _assignment(text: str) -> tuple[str, float]:
    knob, equals, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = None
    if not equals or number is None:
        message = f"--set {text!r}: expected KNOB=NUMBER, e.g. max_num_seqs=128"
        raise ValueError(message)
    return knob.strip(), number


def _refused(answer: dict[str, Any]) -> bool:
    """Whether a change would not go ahead: refused by the actuator or blocked by a guard.

    A policy blocked by ``no_change`` (its knob is already where it wants it) has nothing to
    change, which is no refusal.
    """
    if answer["state"] != "blocked":
        return bool(answer["state"] == REFUSED)
    return [guard for guard, _ in answer.get("refusals") or []] != ["no_change"]


class _NoSignals:
    """A dry run verifies nothing: no signal windows are needed."""

    def measure(self, target: str, window_s: float) -> Mapping[str, float | None]:
        """Nothing known."""
        return {}


def _print(plans: list[dict[str, Any]]) -> None:
    from actuators.vllm.plan import render_plan

    for answer in plans:
        print("\n".join(verdict(answer)))
        if answer.get("plan", {}).get("files"):
            print(render_plan(answer["plan"]))


def verdict(answer: dict[str, Any]) -> list[str]:
    """What came of one plan: the dry run's sentence, or every check that refused it."""
    target, refusals = answer["target"], answer.get("refusals") or []
    if answer["state"] == DRY_RUN:
        return [f"{target}: {answer['outcome']}"]  # "dry run: would write ... and run ..."
    if not _refused(answer) or not refusals:  # nothing to change, or one sentence to say it
        state, outcome = answer["state"], answer["outcome"]
        said = outcome.startswith(state.replace("_", " "))  # "refused (frozen): ..."
        return [f"{target}: {outcome}" if said else f"{target}: {state}: {outcome}"]
    checks = "1 check" if len(refusals) == 1 else f"{len(refusals)} checks"
    lines = [f"{target}: refused by {checks}; nothing would be changed"]
    lines.extend(f"  {guard}: {why}" for guard, why in refusals)
    return lines
