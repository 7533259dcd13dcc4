"""``vllm-governor demo``: the governor retuning a simulated vLLM, live, in a few minutes.

A real ``sim serve`` (8B profile) replays traffic that doubles after 30 s under ``sim
supervise`` (the demo's stand-in for systemd); a real ``vllm-governor run`` watches it with
the default policy pack; proposals are answered in the terminal or automatically. It ends
with a summary counted by the simulated server, what the same traffic would have met without
the governor (simulated in virtual time) and a PNG plot. Everything stays on loopback
and in a temporary directory; see ``docs/demo.md``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from daemon.app.defaults import EXIT_FAILURE, EXIT_USAGE

DEFAULT_DURATION_S = 180.0
PLOT_NAME = "vllm-governor-demo.png"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` subcommand."""
    parser = subparsers.add_parser(
        "demo",
        help="watch the governor retune a simulated vLLM after its traffic shifts",
        description="Start a simulated vLLM (llama-3.1-8b-h100-tp1) replaying bursty traffic "
        "that doubles after 30 s, more than its max-num-batched-tokens can prefill in time, and "
        "the governor with the default policy pack; answer its proposal (with the effect its "
        "what-if predicts); end with the measured effect against the prediction, what the same "
        "traffic would have met without the governor, and a PNG plot. No network, GPU, Slack "
        "or Prometheus.",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=DEFAULT_DURATION_S,
        metavar="SECONDS",
        help=f"length of the workload (default {DEFAULT_DURATION_S:g}; at least the time the "
        "story needs: 178 s with the default pack)",
    )
    parser.add_argument(
        "--approve",
        choices=("terminal", "auto", "deny"),
        default="terminal",
        help="answer proposals with a y/n prompt (default), approve or reject them all",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the summary as JSON")
    parser.add_argument(
        "--plot", type=Path, metavar="PATH", help=f"the PNG plot (default ./{PLOT_NAME})"
    )
    parser.add_argument(
        "--policies",
        type=Path,
        metavar="DIR",
        help="a policy directory to run instead of the default pack (policies/)",
    )
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Run the demo; 0 when it ran to its end, 1 on an error, 130 when interrupted."""
    from daemon.app.demo.children import DemoError
    from daemon.app.demo.runner import Options, print_error, run
    from daemon.app.demo.scenario import DEFAULT_PACK, minimum_duration_s

    policies = args.policies or DEFAULT_PACK
    if not policies.is_dir():
        print_error(f"no policy directory at {policies}")
        return EXIT_USAGE
    minimum, why = minimum_duration_s(policies)
    if args.duration < minimum:
        print_error(
            f"--duration {args.duration:g} is too short for the governor to act: {why}; "
            f"use --duration {minimum:g} or more"
        )
        return EXIT_USAGE
    approve = args.approve
    if approve == "terminal" and not sys.stdin.isatty():
        say("stdin is not a terminal: approving proposals automatically (--approve auto)")
        approve = "auto"
    options = Options(
        duration_s=args.duration,
        approve=approve,
        json_path=args.json,
        plot_path=args.plot or _default_plot(),
        policies=policies.resolve(),
        live=sys.stdout.isatty(),
    )
    with tempfile.TemporaryDirectory(prefix="vllm-governor-demo-") as scratch:
        try:
            return run(options, Path(scratch), say)
        except DemoError as exc:
            print_error(str(exc))
            return EXIT_FAILURE


def say(line: str) -> None:
    """Narrate one step."""
    print(f"[demo] {line}", flush=True)


def _default_plot() -> Path:
    """``./vllm-governor-demo.png``, or the same name in the temp dir if here is read-only."""
    here = Path.cwd()
    if _writable(here):
        return here / PLOT_NAME
    return Path(tempfile.gettempdir()) / PLOT_NAME


def _writable(directory: Path) -> bool:
    try:
        with tempfile.TemporaryFile(dir=directory):
            return True
    except OSError:
        return False
