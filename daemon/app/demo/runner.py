"""The demo from start to stop: files, children, the watch loop, the summary, the plot.

The watch loop runs in the main thread: it answers proposals (in a terminal, one key read
on each turn, so the view goes on updating while it asks), turns what changed into events
and redraws the view. Ctrl-C or SIGTERM stops it; either way the children are stopped in
order before the summary of what ran is printed, so nothing is left running.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from daemon.app.demo.acts import acts, with_governor, without_governor
from daemon.app.demo.approver import Approver, Mode
from daemon.app.demo.children import (
    Children,
    DemoError,
    daemon_command,
    notify_socket,
    supervised_sim_command,
    wait_http_ready,
    wait_ready_notification,
)
from daemon.app.demo.keys import KeyAsker, TerminalKeys
from daemon.app.demo.log_volume import LogVolume, directory_bytes, log_act
from daemon.app.demo.plot import draw
from daemon.app.demo.preparation import prepare
from daemon.app.demo.sampler import Observed, Sampler
from daemon.app.demo.scenario import (
    PROFILE,
    START_MARGIN_S,
    STARTING_MAX_NUM_BATCHED_TOKENS,
    STARTING_MAX_NUM_SEQS,
    Paths,
)
from daemon.app.demo.summary import render, request_counts, summarise
from daemon.app.demo.view import LiveView, PlainView, View
from daemon.app.demo.watch import Watch
from simulator.arrivals import Arrival
from simulator.synthetic_workloads import WorkloadSpec


class Interrupted(Exception):
    """Ctrl-C or SIGTERM: stop the demo."""


@dataclass(frozen=True, slots=True)
class Options:
    """The command line of ``vllm-governor demo``."""

    duration_s: float
    approve: Mode
    json_path: Path | None
    plot_path: Path
    policies: Path
    live: bool


def run(options: Options, scratch: Path, say: Any) -> int:
    """Run the demo in ``scratch``; 0 when it ran to its end, 130 when interrupted.

    Raises:
        DemoError: A piece could not start, or died; the message says which.
    """
    paths = Paths(scratch)
    prepared = prepare(paths, options.duration_s, options.policies)
    spec, arrival_times, sim_port = prepared.spec, prepared.arrival_times, prepared.sim_port
    origin = time.time() + START_MARGIN_S
    say(f"files, sockets and logs in {scratch}; the default pack from {options.policies}")
    for retimed in prepared.retimed:
        say(f"{retimed.prefix}: {retimed.line()}")
    volume = prepared.log_volume
    say(
        f"the server's log directory holds {volume.older_bytes / 1e6:.1f} MB of older logs, "
        f"{100 * volume.older_bytes / volume.budget_bytes:.1f}% of its "
        f"{volume.budget_bytes / 1e6:.1f} MB budget, and the server logs every request"
    )
    children = Children()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    interrupted = False
    sim_url = f"http://127.0.0.1:{sim_port}"
    sampler = Sampler(paths.control_socket, sim_url, paths.vllm_yaml, origin, paths.log_dir)
    view: View = LiveView() if options.live else PlainView()
    keys = TerminalKeys() if options.approve == "terminal" else None
    asker = None if keys is None else KeyAsker(keys)
    approver = Approver(paths.control_socket, options.approve, asker)
    watch = Watch(
        duration_s=options.duration_s,
        approve=options.approve,
        origin=origin,
        arrival_times=arrival_times,
        sampler=sampler,
        approver=approver,
        view=view,
        children=children,
        asker=asker,
    )
    try:
        # Open for the whole run, as systemd's would be: the daemon keeps notifying.
        with notify_socket(paths.notify_socket) as notify:
            _start(children, paths, origin=origin, notify=notify, sim_port=sim_port, say=say)
            sampler.start()
            watch.notify = notify
            with ExitStack() as terminal:
                if keys is not None:
                    terminal.enter_context(keys)
                if isinstance(view, LiveView):
                    terminal.enter_context(view)
                watch.loop()
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
        say("interrupted: stopping the governor and the simulated server")
    finally:
        signal.signal(signal.SIGTERM, previous)
        ended_at = time.time()
        try:
            if sampler.ident is not None:
                sampler.stop()
                sampler.look()  # the journal's and the proposals' final state
        finally:
            children.stop_all()
    say("stopped the governor and the simulated server; nothing is left running")
    context = {
        "profile": PROFILE,
        "workload": spec.name,
        "duration_s": options.duration_s,
        "approve": options.approve,
        "policies": str(options.policies),
        "starting_max_num_seqs": STARTING_MAX_NUM_SEQS,
        "starting_max_num_batched_tokens": STARTING_MAX_NUM_BATCHED_TOKENS,
        "interrupted": interrupted,
    }
    _finish(
        options,
        paths,
        origin=origin,
        ended_at=ended_at,
        sampler=sampler,
        approver=approver,
        arrival_times=arrival_times,
        context=context,
        say=say,
        spec=spec,
        logs=(prepared.arrivals, volume),
    )
    return 130 if interrupted else 0


def _start(
    children: Children, paths: Paths, *, origin: float, notify: Any, sim_port: int, say: Any
) -> None:
    say(
        "starting the simulated vLLM (sim serve, profile "
        f"{PROFILE}) under 'sim supervise', the demo's stand-in for systemd"
    )
    sim = children.start("the simulated vLLM", supervised_sim_command(paths, origin), paths.sim_log)
    say("starting the governor (vllm-governor run) with the default policy pack")
    daemon = children.start(
        "the governor",
        daemon_command(paths),
        paths.daemon_log,
        NOTIFY_SOCKET=str(paths.notify_socket),
    )
    try:
        wait_ready_notification(notify, daemon, timeout_s=60)
        say("the governor reported READY=1")
        wait_http_ready(f"http://127.0.0.1:{sim_port}/health", sim, timeout_s=60)
        say(f"the simulated vLLM serves on 127.0.0.1:{sim_port}")
    except DemoError as exc:
        message = f"{exc} (logs: {paths.daemon_log}, {paths.sim_log})"
        raise DemoError(message) from exc


def _finish(
    options: Options,
    paths: Paths,
    *,
    origin: float,
    ended_at: float,
    sampler: Sampler,
    approver: Approver,
    arrival_times: list[float],
    context: dict[str, Any],
    say: Any,
    spec: WorkloadSpec,
    logs: tuple[list[Arrival], LogVolume],
) -> None:
    lines = _summary_lines(paths.sim_summary)
    observed = sampler.observed
    final_states = {str(p.get("id")): str(p.get("state")) for p in observed.proposals}
    counts = request_counts(lines, ended_at)
    static = None
    if not context["interrupted"]:  # an interrupted run has no acts to compare
        say("simulating the same workload without the governor, in virtual time")
        static = without_governor(
            paths.workload,
            PROFILE,
            spec.seed,
            STARTING_MAX_NUM_SEQS,
            STARTING_MAX_NUM_BATCHED_TOKENS,
        )
    governed = with_governor(
        lines,
        origin=origin,
        arrival_times=arrival_times,
        phases=spec.phases,
        arrived=counts["arrived"],
        in_flight_at_end=counts["in_flight_at_end"],
    )
    summary = summarise(
        lines,
        origin=origin,
        ended_at=ended_at,
        answers=approver.answers,
        actions=observed.actuations,
        final_states=final_states,
        context=context,
        realised=observed.realised,
        acts=[] if static is None else acts(spec.phases, governed, static),
        logs=None if static is None else _log_act(paths, observed, origin, ended_at, logs),
    )
    say("summary (counted by the simulated server itself):")
    for line in render(summary):
        print("  " + line, flush=True)
    if options.json_path is not None:
        options.json_path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
        say(f"summary written to {options.json_path}")
    # A copy taken under the lock: a sampler thread that outlived its stop's join (a busy
    # machine) may still append, and the plot reads the samples more than once.
    with observed.lock:
        samples = list(observed.samples)
    if samples:
        times = [_seconds_after(p.get("created_at"), origin) for p in observed.proposals]
        draw(options.plot_path, samples, arrival_times, summary, [
            t for t in times if t is not None
        ])  # fmt: skip
        say(f"plot written to {options.plot_path}")


def _log_act(
    paths: Paths,
    observed: Observed,
    origin: float,
    ended_at: float,
    logs: tuple[list[Arrival], LogVolume],
) -> dict[str, Any]:
    """The disk act: the log directory as sampled, and once more now that the server stopped."""
    with observed.lock:
        measured = [(s.t, s.log_bytes) for s in observed.samples if s.log_bytes is not None]
    final = directory_bytes(paths.log_dir)
    if final is not None:
        measured.append((time.time() - origin, final))
    arrivals, volume = logs
    return log_act(volume, arrivals, measured, ended_at - origin)


def _summary_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            continue  # a line torn by a killed process: that process is not counted
    return lines


def _seconds_after(iso: Any, origin: float) -> float | None:
    if not isinstance(iso, str):
        return None
    try:
        return datetime.fromisoformat(iso).timestamp() - origin
    except ValueError:
        return None


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise Interrupted


def print_error(message: str) -> None:
    """An error for the terminal."""
    print(f"vllm-governor demo: {message}", file=sys.stderr, flush=True)
