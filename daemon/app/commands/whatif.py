"""``vllm-governor whatif TARGET``: which max-num-seqs x max-num-batched-tokens would serve best.

From the running daemon when there is one: it characterises the target's recent workload from
its own store (``--window``, default 10 minutes) and simulates every candidate setting inside
the target's envelopes in a worker process. Without a daemon, the configured sources are
collected for ``--collect`` seconds first and the same round runs in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.app.commands.whatif_table import report_lines
from daemon.app.config_broken import config_broken
from daemon.app.control_client import call_daemon
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_FAILURE, EXIT_OK
from daemon.core.errors import ConfigError, ControlError, DaemonNotRunningError
from daemon.policy.durations import parse_duration

if TYPE_CHECKING:
    from daemon.core.settings import GovernorConfig

# The daemon answers within the worker's wall-clock bound (150 s); the socket waits a bit longer.
_ANSWER_TIMEOUT_S = 180.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``whatif`` subcommand."""
    parser = subparsers.add_parser(
        "whatif",
        help="predict which max-num-seqs x max-num-batched-tokens would serve the recent load",
        description="Characterise TARGET's recent workload from vLLM's own metrics (rate, "
        "burstiness, prompt and output lengths), replay it in the simulator with the engine "
        "profile for every max_num_seqs x max_num_batched_tokens inside the target's "
        "envelopes, the restart's downtime included, and rank them by predicted goodput "
        "under the SLO. Asks the running daemon; without one, collects from the configured "
        "sources for --collect seconds first. Proposes nothing: it only predicts.",
    )
    parser.add_argument("target", help="the [[vllm]] instance's name")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml in use")
    parser.add_argument("--socket", type=Path, help="control socket (default: from the config)")
    parser.add_argument(
        "--window", type=_duration, default=600.0, help="recent window to characterise (10m)"
    )
    parser.add_argument(
        "--profile",
        help="engine profile: a shipped name or a file (default: llama-3.1-8b-h100-tp1)",
    )
    parser.add_argument("--ttft-slo", type=_duration, help="TTFT objective (default 2s)")
    parser.add_argument("--tpot-slo", type=_duration, help="TPOT objective (default 100ms)")
    parser.add_argument(
        "--simulated", type=_duration, help="synthetic workload per candidate (default 5m)"
    )
    parser.add_argument(
        "--horizon", type=_duration, help="a restart's downtime is paid back over (default 1h)"
    )
    parser.add_argument(
        "--min-gain", type=float, help="least predicted gain to pick a change (default 0.05)"
    )
    parser.add_argument(
        "--collect",
        type=_duration,
        default=60.0,
        help="without a daemon: seconds to collect before planning (default 60)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON, the profile check too")
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Print the what-if."""
    from daemon.core.config_files import load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return config_broken(exc)
    question = {
        "profile": args.profile,
        "ttft_slo_s": args.ttft_slo,
        "tpot_slo_s": args.tpot_slo,
        "simulated_s": args.simulated,
        "horizon_s": args.horizon,
        "min_gain": args.min_gain,
    }
    try:
        answer = _ask_daemon(config, args, question)
    except DaemonNotRunningError:
        print(f"no daemon running; collecting for {args.collect:g} s", file=sys.stderr)
        try:
            answer = _offline(config, args, question)
        except ControlError as exc:
            print(f"vllm-governor: {exc}", file=sys.stderr)
            return EXIT_FAILURE
    except ControlError as exc:
        print(f"vllm-governor: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        print("\n".join(report_lines(answer)))
    return EXIT_OK


def _ask_daemon(
    config: GovernorConfig, args: argparse.Namespace, question: dict[str, Any]
) -> dict[str, Any]:
    socket_path = args.socket or config.control.socket_path
    answer: dict[str, Any] = call_daemon(
        socket_path,
        "whatif",
        timeout_s=_ANSWER_TIMEOUT_S,
        target=args.target,
        window_s=args.window,
        **question,
    )
    return answer


def _offline(
    config: GovernorConfig, args: argparse.Namespace, question: dict[str, Any]
) -> dict[str, Any]:
    """The same round as the daemon's, on a fresh collection, in this process.

    Raises:
        ControlError: the target is unknown, or the round could not be answered.
    """
    from actuators.vllm.knob_reader import KnobReader
    from daemon.core.clock import SystemClock
    from daemon.engine.evaluation.one_off import collected_plane
    from daemon.engine.evaluation.whatif_desk import question_of
    from daemon.whatif.errors import WhatIfError
    from daemon.whatif.rounds import Round, run_round

    instance = next((i for i in config.vllm if i.name == args.target), None)
    if instance is None:
        message = f"no [[vllm]] instance named {args.target!r} in {args.config}"
        raise ControlError(message)
    plane = asyncio.run(collected_plane(config, SystemClock(), args.collect))
    newest = [plane.store.latest(key) for key in plane.store.keys("vllm_num_requests_running")]
    now = max((point[0] for point in newest if point is not None), default=0.0)
    job = Round(
        instance=instance,
        series=plane.store,
        now=now,
        window_s=args.collect,
        in_force=dict(KnobReader().read(instance)),
        question=question_of({key: value for key, value in question.items() if value is not None}),
    )
    try:
        return run_round(job).to_json()
    except WhatIfError as exc:
        raise ControlError(str(exc)) from exc


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
