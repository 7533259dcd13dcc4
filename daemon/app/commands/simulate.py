"""``vllm-governor simulate``: the governor and the baselines on one workload, in virtual time.

Runs the governor's real engine (policies, planner, gate, the actuation protocol with restart
downtime, approvals answered after a delay) against the simulated vLLM, and in the same run,
on the same seeds, the baselines; prints a table with ratios against ``static-default`` and
writes the JSON report and a plot. Progress goes to stderr. See docs/simulate.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from daemon.app.defaults import EXIT_CONFIG, EXIT_OK
from daemon.app.simulation.names import BASELINES


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``simulate`` subcommand."""
    parser = subparsers.add_parser(
        "simulate",
        help="compare the policies with baselines on the simulated vLLM (virtual time)",
        description="Run the governor (real policies, planner, gate and actuation protocol) "
        "and baselines on the same workload and seeds in virtual time; print a table with "
        "ratios against static-default; write JSON and a plot.",
    )
    workload = parser.add_mutually_exclusive_group(required=True)
    workload.add_argument(
        "--trace", type=Path, help="CSV trace to replay (a path, or a shipped name)"
    )
    workload.add_argument(
        "--workload",
        type=Path,
        help="synthetic workload spec (YAML: a path, or a shipped name such as proof-four-phases)",
    )
    parser.add_argument(
        "--profile",
        default="llama-3.1-8b-h100-tp1",
        help="engine profile: a name or a file (default: %(default)s)",
    )
    parser.add_argument(
        "--policies",
        type=Path,
        action="append",
        help="policy directory (repeatable; default: the shipped pack)",
    )
    parser.add_argument(
        "--config", type=Path, help="config.toml for envelopes (default: a built-in one)"
    )
    parser.add_argument(
        "--start",
        type=starting_point,
        metavar="SEQSxTOKENS",
        help="the server's max-num-seqs x max-num-batched-tokens when the run starts, for every "
        "controller but the best-static grid (default: vLLM's defaults on the profile); "
        "static-default then keeps them",
    )
    parser.add_argument(
        "--baselines",
        default=",".join(BASELINES),
        help=f"comma-separated controllers (default: all: {','.join(BASELINES)})",
    )
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--plot", type=Path, help="write a PNG plot here")
    parser.add_argument("--seeds", type=int, default=1, help="seeds 1..N (default 1)")
    parser.add_argument(
        "--approval-delay",
        type=float,
        default=60.0,
        help="seconds before an answer (default: %(default)s)",
    )
    parser.add_argument(
        "--approval-answer",
        choices=("approve", "reject"),
        default="approve",
        help="the answer given (default: %(default)s)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="worker processes (default: %(default)s)"
    )
    parser.set_defaults(main=main)


def starting_point(text: str) -> tuple[int, int]:
    """``64x2048`` -> ``(64, 2048)``.

    Raises:
        argparse.ArgumentTypeError: not two positive whole numbers joined by ``x``.
    """
    seqs, _, tokens = text.strip().lower().partition("x")
    if not (seqs.isdigit() and tokens.isdigit() and int(seqs) > 0 and int(tokens) > 0):
        message = f"expected SEQSxTOKENS, two positive whole numbers such as 64x2048; got {text!r}"
        raise argparse.ArgumentTypeError(message)
    return int(seqs), int(tokens)


def main(args: argparse.Namespace) -> int:
    """Run the session and write its outputs."""
    from daemon.app.simulation.reports import plot, table
    from daemon.app.simulation.runs import Job
    from daemon.app.simulation.session import (
        Session,
        check_controllers,
        simulate,
    )
    from daemon.core.errors import ConfigError
    from daemon.shipped import default_pack
    from simulator.errors import SimulatorError

    controllers = tuple(name.strip() for name in args.baselines.split(",") if name.strip())
    if args.seeds < 1 or args.jobs < 1 or args.approval_delay < 0:
        print("error: --seeds and --jobs must be >= 1, --approval-delay >= 0", file=sys.stderr)
        return EXIT_CONFIG
    try:
        check_controllers(controllers)
        template = Job(
            controller="",
            profile=args.profile,
            trace=args.trace,
            spec=args.workload,
            seed=1,
            policy_dirs=tuple(args.policies or [default_pack()]),
            config=args.config,
            approval_delay_s=args.approval_delay,
            approval_answer=args.approval_answer,
            start=args.start,
        )
        session = Session(template, tuple(range(1, args.seeds + 1)), controllers, args.jobs)
        report, tallies = simulate(session)
    except (ValueError, ConfigError, SimulatorError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    print(table(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.plot is not None:
        plot(report, tallies, args.plot)
    return EXIT_OK
