"""``vllm-governor explain POLICY``: each condition's value now, and what would happen.

From the running daemon when there is one (its states, its signals); otherwise, like
``signals``, from a one-off collection of the configured sources over ``--window`` seconds,
with the policy loaded from the configured directories and a fresh state: what a governor
started now would decide.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.app.config_broken import config_broken
from daemon.app.control_client import call_daemon
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_FAILURE, EXIT_OK
from daemon.core.errors import ConfigError, ControlError, DaemonNotRunningError

if TYPE_CHECKING:
    from daemon.core.settings import GovernorConfig


_WHATIF_TIMEOUT_S = 180.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``explain`` subcommand."""
    parser = subparsers.add_parser(
        "explain",
        help="show why a policy is (not) firing and what it would do",
        description="For the current signals, show a policy's condition, the value of each "
        "signal it reads, how long it has held, when a pending policy will fire, and what the "
        "next evaluation would decide. Asks the running daemon; without one, collects from "
        "the configured sources for --window seconds and explains what a governor started "
        "now would decide.",
    )
    parser.add_argument("policy", help="the policy's name")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    parser.add_argument("--socket", type=Path, help="control socket (default: from the config)")
    parser.add_argument(
        "--window",
        type=float,
        default=5.0,
        help="seconds of one-off collection without a daemon (default 5)",
    )
    parser.add_argument(
        "--whatif",
        action="store_true",
        help="a tune policy: run its what-if now (in the daemon's worker) rather than show "
        "its last round",
    )
    parser.add_argument("--json", action="store_true", help="print the raw JSON answer")
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Ask the daemon, or collect and evaluate here; print the explanation."""
    try:
        answer = _answer(args)
    except ConfigError as exc:
        return config_broken(exc)
    except ControlError as exc:
        print(f"vllm-governor: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if "error" in answer:
        print(f"vllm-governor: {answer['error']}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        print("\n".join(render(answer)))
    return EXIT_OK


def _answer(args: argparse.Namespace) -> dict[str, Any]:
    """The daemon's explanation, or one made here when no daemon runs.

    Raises:
        ConfigError: the configuration is needed and broken.
        ControlError: a daemon runs but did not answer (a refusal, no permission...).
    """
    config = None if args.socket is not None else _config(args.config)
    socket_path: Path = args.socket if config is None else config.control.socket_path
    try:
        # A what-if round takes seconds in the daemon's worker (bounded at 150 s).
        timeout_s = _WHATIF_TIMEOUT_S if args.whatif else 10.0
        answer: dict[str, Any] = call_daemon(
            socket_path, "explain", timeout_s, policy=args.policy, whatif=args.whatif
        )
    except DaemonNotRunningError:
        return _without_daemon(config or _config(args.config), args)
    return answer


def _config(path: Path) -> GovernorConfig:
    from daemon.core.config_files import load_config

    return load_config(path)


def _without_daemon(config: GovernorConfig, args: argparse.Namespace) -> dict[str, Any]:
    """The explanation from a fresh state on signals collected here for ``--window`` seconds."""
    from actuators.vllm.knob_reader import KnobReader
    from daemon.core.clock import SystemClock
    from daemon.engine.evaluation.one_off import collect_once
    from daemon.policy.explanations import explain_policy
    from daemon.policy.loading import load_policies
    from daemon.policy.views import target_views
    from daemon.sources.registry import signal_registry

    signals = signal_registry(config)
    loaded = load_policies(
        config.governor.policy_dirs,
        config.target_names(),
        config.envelopes(),
        config.live_target_names(),
        signals,
    )
    spec = next((s for s in loaded.specs if s.name == args.policy), None)
    if spec is None:
        known = ", ".join(s.name for s in loaded.specs) or "none"
        broken = f"; {len(loaded.broken_files)} file(s) with problems" if loaded.issues else ""
        hint = " (see 'vllm-governor check')" if broken else ""
        return {"error": f"no policy named {args.policy!r} (loaded: {known}{broken}){hint}"}
    print(f"no daemon running; collecting for {args.window:g} s", file=sys.stderr)
    clock = SystemClock()
    look = asyncio.run(collect_once(config, clock, args.window))
    reader = KnobReader()
    knobs = {
        instance.name: reader.read(instance)
        for instance in config.vllm
        if instance.config_path is not None
    }
    views = target_views(look.rows, config.target_names(), knobs, signals)
    answer = explain_policy(spec, {}, views, clock.monotonic(), clock.wall())
    answer["collected_for_s"] = args.window
    answer["window_s"] = round(look.window_s, 2)  # what its rates and quantiles cover
    return answer


def render(answer: dict[str, Any]) -> list[str]:
    """The explanation for a terminal."""
    lines = [f"{answer['policy']}: {answer['description']}"]
    if "collected_for_s" in answer:
        lines.append(
            f"  (no daemon: a governor started now, on {answer['collected_for_s']:g} s of "
            "signals collected here, which its rates and quantiles cover)"
        )
    for target, view in answer["targets"].items():
        lines.append(f"  target {target}: {view['phase']} -> {view['next_phase']}")
        lines.append(f"    when: {view['condition']}  (for {view['for_s']:g} s)")
        if "result" in view:
            lines.append(f"    now: {view['result']}")
        if view.get("error"):
            lines.append(f"    error: {view['error']} (the policy holds until it evaluates again)")
        implausible = view.get("implausible", {})
        for name, value in view["signals"].items():
            shown = "no data" if value is None else value
            if name in implausible:
                shown = f"implausible ({implausible[name]}): no data"
            lines.append(f"      {name} = {shown}")
        if view["held_for_s"] is not None:
            lines.append(f"    in this phase for {view['held_for_s']} s")
        lines.extend(_when_next(answer, view))
        for would in view["would"] or [{"kind": "nothing", "guard": None, "intent": None}]:
            guard = f" (blocked by {would['guard']})" if would["guard"] else ""
            intent = f": {would['intent']['changes']}" if would["intent"] else ""
            if would["kind"] == "tune":
                intent = " (a what-if round picks the values)"
            lines.append(f"    would: {would['kind']}{guard}{intent}")
        if "tune" in view:
            lines.extend(_tune_lines(view["tune"]))
    return lines


def _tune_lines(tune: dict[str, Any]) -> list[str]:
    """A tune policy's what-if: its last round's candidates and predictions, or why none."""
    from daemon.app.commands.whatif_table import report_lines

    if tune.get("error"):
        return [f"    what-if: could not run: {tune['error']}"]
    if tune.get("report") is None:
        return ["    what-if: no round yet (it runs when the policy acts; --whatif runs one now)"]
    lines = [f"    what-if, {tune['age_s']:g} s ago:"]
    lines += [f"      {line}" if line else "" for line in report_lines(tune["report"])]
    return lines


def _when_next(answer: dict[str, Any], view: dict[str, Any]) -> list[str]:
    """When a pending policy fires, or a firing one resolves, if its condition keeps holding."""
    from daemon.policy.testing.timing import format_seconds

    lines = []
    if view.get("fires_in_s") is not None:
        verb = "act" if answer.get("acts") else "fire"
        wait = format_seconds(round(view["fires_in_s"]))
        lines.append(f"    will {verb} in {wait} if the condition keeps holding")
    if view.get("resolves_in_s") is not None:
        wait = format_seconds(round(view["resolves_in_s"]))
        lines.append(f"    will resolve in {wait} if the exit condition keeps holding")
    return lines
