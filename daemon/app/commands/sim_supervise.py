"""``vllm-governor sim supervise`` and ``sim restart``: a stand-in for systemd, for one program.

``sim supervise --socket PATH -- COMMAND...`` keeps one process (a ``sim serve``) running and
restarts it on request; ``sim restart --socket PATH`` is that request, and the restart
command a governor is given where there is no systemd (the demo). See
:mod:`simulator.server.supervisor`.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from daemon.app.defaults import EXIT_FAILURE, EXIT_OK, EXIT_USAGE


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``sim supervise`` and ``sim restart``."""
    supervise = commands.add_parser(
        "supervise",
        help="keep one program (a sim serve) running; restart it on request",
        description="Start COMMAND (an argument list, no shell), start it again when it exits "
        "on its own, and restart it when 'sim restart --socket PATH' asks. SIGTERM stops it "
        "(SIGTERM, then SIGKILL after --stop-timeout) and exits.",
    )
    supervise.add_argument("--socket", type=Path, required=True, help="Unix socket to listen on")
    supervise.add_argument(
        "--stop-timeout", type=float, default=30.0, help="seconds from SIGTERM to SIGKILL"
    )
    supervise.add_argument(
        "--start-s",
        type=float,
        default=0.5,
        help="seconds a restarted program must stay up for the restart to succeed",
    )
    supervise.add_argument(
        "--env-file",
        type=Path,
        help="NAME=value lines added to the program's environment, read at each start "
        "(as systemd's EnvironmentFile=)",
    )
    supervise.add_argument("program", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    supervise.set_defaults(main=supervise_main)
    restart = commands.add_parser(
        "restart",
        help="ask a 'sim supervise' to restart its program",
        description="Restart the program of the 'sim supervise' listening on --socket; exit 0 "
        "once the new process is up, 1 if it is not (the reason goes to stderr).",
    )
    restart.add_argument("--socket", type=Path, required=True, help="the supervisor's socket")
    restart.add_argument("--status", action="store_true", help="print its status instead")
    restart.add_argument("--timeout", type=float, default=120.0, help="seconds to wait")
    restart.set_defaults(main=restart_main)


def supervise_main(args: argparse.Namespace) -> int:
    """Supervise the program until SIGTERM."""
    from simulator.server.supervisor import Supervisor, run_supervisor

    program = list(args.program)
    if program[:1] == ["--"]:
        program = program[1:]
    if not program:
        print("vllm-governor sim supervise: name the program after --", file=sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s sim-supervise %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    supervisor = Supervisor(
        program,
        args.socket,
        stop_timeout_s=args.stop_timeout,
        start_s=args.start_s,
        env_file=args.env_file,
    )
    return run_supervisor(supervisor)


def restart_main(args: argparse.Namespace) -> int:
    """Send one request; say what came of it."""
    from simulator.server.supervisor_client import SupervisorError, ask_supervisor

    request = "status" if args.status else "restart"
    try:
        answer = ask_supervisor(args.socket, request, timeout_s=args.timeout)
    except SupervisorError as exc:
        print(f"vllm-governor sim restart: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(json.dumps(answer))
    return EXIT_OK
