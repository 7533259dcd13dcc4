"""``vllm-governor sim``: the simulated vLLM.

``sim run`` simulates a whole workload in virtual time with the static settings of a vLLM
``--config`` YAML and writes the JSON report; ``sim serve`` runs the same model in real time
as a server that looks like vLLM 0.33 from outside (see ``simulator/README.md``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from daemon.app.commands import sim_supervise
from daemon.app.defaults import EXIT_CONFIG, EXIT_OK
from simulator.shipped import DEFAULT_HOST, DEFAULT_PORT, shipped_profiles


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``sim`` subcommand and its own subcommands."""
    parser = subparsers.add_parser(
        "sim",
        help="the simulated vLLM: virtual-time runs and a real-time server",
        description="A simulated vLLM V1 engine calibrated on published figures.",
    )
    commands = parser.add_subparsers(title="sim commands", metavar="SIM_COMMAND")
    _register_run(commands)
    _register_serve(commands)
    # The demo's stand-in for systemd: keep one `sim serve` alive, restart it on request.
    sim_supervise.register(commands)


def _register_run(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "run",
        help="simulate a workload in virtual time and write a JSON report",
        description="Simulate a whole workload in virtual time with the static settings of a "
        "vLLM --config YAML, print a summary and write the report as JSON.",
    )
    parser.add_argument(
        "--config", type=Path, required=True, help="vLLM --config YAML (vLLM's own format)"
    )
    parser.add_argument(
        "--profile",
        required=True,
        help=f"engine profile: a shipped name ({', '.join(shipped_profiles())}) or a file",
    )
    workload = parser.add_mutually_exclusive_group(required=True)
    workload.add_argument("--trace", type=Path, help="CSV trace to replay")
    workload.add_argument("--workload", type=Path, help="synthetic workload spec (YAML)")
    parser.add_argument("--seed", type=int, help="seed (default: the spec's own, or 0)")
    parser.add_argument(
        "--time-scale", type=float, default=1.0, help="multiply a trace's arrival times"
    )
    parser.add_argument(
        "--rate-scale", type=float, default=1.0, help="multiply a trace's request rate"
    )
    parser.add_argument("--json", type=Path, required=True, help="where to write the report")
    parser.set_defaults(main=run_main)


def _register_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "serve",
        help="run a simulated vLLM 0.33 server in real time",
        description="Serve the simulated engine in real time behind vLLM 0.33's HTTP API "
        "(/health, /ping, /version, /v1/models, /v1/completions, /metrics). The port stays "
        "closed while the engine 'loads'; SIGTERM drains for the YAML's shutdown-timeout "
        "(default 0: abort in-flight requests), then the process exits 0. Restart the process "
        "to apply a changed config. As vLLM, it logs at $VLLM_LOGGING_LEVEL (default INFO) "
        "and, with the YAML's enable-log-requests at INFO, one line per request it takes.",
    )
    parser.add_argument(
        "--config", type=Path, required=True, help="vLLM --config YAML (vLLM's own format)"
    )
    parser.add_argument(
        "--profile",
        required=True,
        help=f"engine profile: a shipped name ({', '.join(shipped_profiles())}) or a file",
    )
    parser.add_argument(
        "--host", help=f"address to listen on (default: the YAML's host:, else {DEFAULT_HOST})"
    )
    parser.add_argument(
        "--port", type=int, help=f"port (default: the YAML's port:, else {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--load",
        metavar="TRACE_OR_SPEC",
        help="replay a trace CSV or a workload YAML (a path or a shipped name) against the "
        "server itself, from the moment it is ready",
    )
    parser.add_argument("--load-seed", type=int, help="seed of a workload spec")
    parser.add_argument(
        "--load-origin",
        type=float,
        metavar="UNIX_TIME",
        help="pin the workload's time 0 to this Unix time, so that a restarted server "
        "continues the workload (arrivals while it was down are counted as missed)",
    )
    parser.add_argument(
        "--loading-s",
        type=float,
        metavar="SECONDS",
        help="seconds the port stays closed at start (default: the profile's restart time)",
    )
    parser.add_argument(
        "--summary",
        type=Path,
        metavar="PATH",
        help="on exit, append one JSON line to PATH: this process's requests by outcome, "
        "those that met the SLO, preemptions and its share of the --load workload",
    )
    parser.add_argument(
        "--gate-socket",
        type=Path,
        metavar="PATH",
        help="put an admission gate in front of the --load replay (a cap and a queue with "
        "HAProxy's timeout) and answer HAProxy's runtime API over it on this Unix socket "
        "(show stat, set maxconn server, set server state), as [vllm.gate] expects; it "
        "opens at max-num-seqs at each start unless --gate-state keeps its cap",
    )
    parser.add_argument(
        "--gate-state",
        type=Path,
        metavar="FILE",
        help="keep the gate's cap in this file across the server's restarts, as HAProxy's "
        "live maxconn outlives vLLM's restarts (a missing file: open at max-num-seqs)",
    )
    parser.add_argument(
        "--gate-backend", default="vllm", help="the gate's backend name (default: vllm)"
    )
    parser.add_argument("--gate-server", default="main", help="the gate's server name (main)")
    parser.add_argument(
        "--gate-queue-timeout-s",
        type=float,
        default=1.5,
        metavar="SECONDS",
        help="HAProxy's timeout queue: the longest wait at the gate before a 503 (1.5)",
    )
    parser.set_defaults(main=serve_main)


def serve_main(args: argparse.Namespace) -> int:
    """Resolve the inputs and serve until SIGTERM."""
    from simulator.errors import SpecError
    from simulator.server.options import GateOptions, ServeOptions, resolve
    from simulator.server.process import run_server
    from simulator.server.request_log import logging_level

    options = ServeOptions(
        config=args.config,
        profile=args.profile,
        host=args.host,
        port=args.port,
        load=args.load,
        load_seed=args.load_seed,
        load_origin=args.load_origin,
        loading_s=args.loading_s,
        summary=args.summary,
        # As vLLM reads VLLM_LOGGING_LEVEL: once, at start.
        log_level=logging_level(os.environ),
        gate=None
        if args.gate_socket is None
        else GateOptions(
            args.gate_socket,
            args.gate_backend,
            args.gate_server,
            args.gate_queue_timeout_s,
            args.gate_state,
        ),
    )
    try:
        plan = resolve(options)
    except SpecError as exc:
        for issue in exc.issues:
            print(issue.render(), file=sys.stderr)
        return EXIT_CONFIG
    logging.basicConfig(
        level=plan.log_level,
        format="%(asctime)s sim-vllm %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    return run_server(plan)


def run_main(args: argparse.Namespace) -> int:
    """Load the inputs, simulate, print a summary and write the report."""
    from simulator.errors import SpecError
    from simulator.profiles import load_profile
    from simulator.static_runs import simulate
    from simulator.synthetic_workloads import generate, load_workload
    from simulator.trace_replay import read_trace
    from simulator.vllm_config import load_vllm_config

    try:
        profile = load_profile(args.profile)
        settings = load_vllm_config(args.config, profile)
        if args.trace is not None:
            seed = 0 if args.seed is None else args.seed
            arrivals = read_trace(
                args.trace, time_scale=args.time_scale, rate_scale=args.rate_scale, seed=seed
            )
            name = f"trace {args.trace}"
        else:
            spec = load_workload(args.workload)
            arrivals = generate(spec, args.seed)
            name = f"workload {spec.name} (seed {spec.seed if args.seed is None else args.seed})"
    except SpecError as exc:
        for issue in exc.issues:
            print(issue.render(), file=sys.stderr)
        return EXIT_CONFIG
    report = simulate(profile, settings, arrivals, name)
    args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(_summary(report, args.json))
    return EXIT_OK


def _summary(report: dict[str, Any], path: Path) -> str:
    requests = report["requests"]

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1000:.0f} ms"

    attainment = report["slo_attainment"]
    lines = [
        f"{report['workload']} on {report['profile']['name']}, "
        f"{report['duration_s']:.0f} s simulated",
        f"requests: {requests['total']} total, {requests['completed']} completed, "
        f"{requests['aborted']} aborted, {requests['rejected']} rejected",
        f"SLO attainment {'-' if attainment is None else f'{attainment:.1%}'}, "
        f"goodput {report['goodput_rps']:.2f} req/s ({report['goodput_tok_s']:.0f} tok/s), "
        f"throughput {report['throughput_tok_s']:.0f} tok/s",
        f"TTFT p50 {ms(report['ttft_p50_s'])} p95 {ms(report['ttft_p95_s'])}; "
        f"TPOT p50 {ms(report['tpot_p50_s'])} p95 {ms(report['tpot_p95_s'])}",
        f"preemptions {report['preemptions']}, restarts {report['restarts']}, "
        f"downtime {report['downtime_s']:.0f} s",
        f"report: {path}",
    ]
    return "\n".join(lines)
