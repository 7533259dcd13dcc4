"""Online traffic and a batch backlog through one engine, the backlog sent as a window allows.

A window is a function of the time: how many batch requests may be in flight then (0: the
window is closed). :func:`run_with_batch_window` checks it every ``tick_s`` and tops the
batch lane up to it from the backlog, in order, as a batch runner with a concurrency limit
does; it never cancels what is in flight when the window narrows or closes (a cron job that
stops sending). Baselines of issue 18:

- no batch work: :func:`closed` (the backlog is never sent);
- a fixed nightly cron window: :func:`nightly` (from one hour of the day to another, at a
  fixed concurrency).

The governor's own window is the daemon's business: it drives the simulated server through
vLLM's API like any client, with the same priority marker (:mod:`simulator.lanes`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from simulator.arrivals import Arrival
from simulator.engine import Engine
from simulator.lanes import Lane, lane_of
from simulator.virtual_time import VirtualRun

Window = Callable[[float], int]


def closed(_: float) -> int:
    """No batch work at any time."""
    return 0


def nightly(*, start_hour: float, end_hour: float, concurrency: int, hour_s: float) -> Window:
    """A cron window: ``concurrency`` from ``start_hour`` to ``end_hour`` of each day, else 0.

    ``hour_s`` is the simulated length of an hour (a compressed day's); a window may wrap
    midnight (22 to 6).
    """

    def window(now: float) -> int:
        hour = (now / hour_s) % 24
        if start_hour <= end_hour:
            inside = start_hour <= hour < end_hour
        else:
            inside = hour >= start_hour or hour < end_hour
        return concurrency if inside else 0

    return window


def run_with_batch_window(
    engine: Engine,
    online: Sequence[Arrival],
    backlog: Sequence[Arrival],
    window: Window,
    *,
    until: float,
    tick_s: float = 1.0,
    sample_interval_s: float = 60.0,
    start_spacing_s: float = 0.0,
) -> VirtualRun:
    """Run the online arrivals to ``until``, sending the backlog as ``window`` allows.

    Returns the run; its records hold both lanes (each with its priority), its samples the
    engine on a ``sample_interval_s`` grid. Batch requests still in flight at ``until`` are
    left unfinished (not in the records). With ``start_spacing_s`` the runner starts at most
    one request per spacing (a paced lane, as the governor's ``start_spacing``), looking every
    spacing instead of every ``tick_s``.
    """
    run = VirtualRun(engine, online, sample_interval_s=sample_interval_s)
    sent = 0
    in_flight = 0
    seen = 0
    if start_spacing_s > 0:
        tick_s = start_spacing_s
    while run.now < until:
        target = min(until, run.now + tick_s)
        run.run_until(target)
        if run.now < target and run.done:
            run.now = target  # nothing in flight and no arrival left: idle time passes
        records = run.finished
        for record in records[seen:]:
            if lane_of(record.priority) is Lane.BATCH:
                in_flight -= 1
        seen = len(records)
        room = window(run.now) - in_flight
        if start_spacing_s > 0:
            room = min(room, 1)
        while room > 0 and sent < len(backlog) and engine.accepting:
            job = backlog[sent]
            # A job refused at once leaves a record too, collected at the next tick.
            engine.submit(
                job.prompt_tokens,
                job.output_tokens,
                run.now,
                f"batch-{sent}",
                priority=job.priority,
            )
            sent += 1
            in_flight += 1
            room -= 1
    return run
