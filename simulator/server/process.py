"""The ``sim serve`` process: load, listen, drive the engine, drain on SIGTERM, exit.

The lifecycle follows ``vllm serve`` as the governor sees it:

1. **Loading.** The port stays closed (connections are refused) for the loading time, as
   vLLM's is until its engine is built. SIGTERM now exits at once.
2. **Serving.** The port opens; the engine driver and, with ``--load``, the workload replay
   run as named tasks under one task group; with ``--gate-socket`` the replay passes an
   admission gate whose cap HAProxy's runtime API on that socket moves
   (:mod:`simulator.server.gated_load`).
3. **SIGTERM (or SIGINT).** The engine drains for up to ``shutdown-timeout`` s of the YAML
   (0, the default, aborts in-flight requests at once); new requests get 500 meanwhile. When
   it has stopped, the port closes and the process exits 0.

A restart is the process being started again (by systemd, supervisord or a test): it reads
the YAML afresh, so a changed ``max-num-seqs`` takes effect, and its counters start at zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Coroutine
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

from simulator.engine import Engine
from simulator.requests import FinishedRequest
from simulator.server.clock import LoopClock
from simulator.server.driver import RealTimeDriver
from simulator.server.gated_load import GatedLoad, KeptCap
from simulator.server.load_replay import LoadTally, replay
from simulator.server.metrics import VllmMetrics
from simulator.server.options import ServePlan
from simulator.server.routes import VllmApi
from simulator.server.run_summary import RunLedger, append_summary, summary_line
from simulator.server.virtual_haproxy import VirtualHaproxy, serve_haproxy

EXIT_OK = 0
EXIT_FAILURE = 1
# Handlers end as soon as the engine has stopped; this only bounds a stuck client.
_HTTP_SHUTDOWN_TIMEOUT_S = 5.0

log = logging.getLogger("simulator.server")


def run_server(plan: ServePlan) -> int:
    """Run the server until SIGTERM; return the exit status."""
    return asyncio.run(_serve_until_signalled(plan))


async def _serve_until_signalled(plan: ServePlan) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _on_signal, signum, stop)
    return await serve(plan, stop)


async def serve(plan: ServePlan, stop: asyncio.Event) -> int:
    """Load, serve, and drain once ``stop`` is set (as on SIGTERM); return the exit status.

    Everything runs on the loop's clock, so on a virtual-time loop
    (:mod:`daemon.core.virtual_time`'s kind) the server runs as fast as it can be computed.
    """
    if await _stopped_while_loading(plan, stop):
        log.info("stopped while loading")
        if plan.summary is not None:
            _append(plan, _settings_of(plan), None, ledger=RunLedger(), preemptions=0, load=None)
        return EXIT_OK
    clock = LoopClock(asyncio.get_running_loop())
    engine = Engine(plan.profile, plan.settings, now=clock.now())
    registry = _registry()
    metrics = None
    if not plan.settings.disable_log_stats:
        metrics = VllmMetrics(engine, clock, created=time.time())
        registry.register(metrics)
    driver = RealTimeDriver(engine, clock, metrics, log_requests=plan.log_requests)
    ledger = RunLedger()
    driver.on_finished = ledger.observe
    tally = LoadTally(total=len(plan.arrivals))
    gated = _gated_load(plan, driver, ledger, tally)
    haproxy = None
    if gated is not None:
        # Before the port opens: whoever sees the server ready finds its gate answering (the
        # governor lifts its drain as soon as a restarted server is ready).
        assert plan.gate is not None
        keeper = VirtualHaproxy(gated, plan.gate.backend, plan.gate.server)
        haproxy = await serve_haproxy(keeper, plan.gate.socket)
        log.info("gate: HAProxy's runtime API on %s, cap %d", plan.gate.socket, gated.gate.cap)
    runner = await _listen(plan, VllmApi(driver, registry, plan.settings.served_model_name))
    if runner is None:
        if haproxy is not None:
            haproxy.close()
        return EXIT_FAILURE
    ready_at = time.time()
    failed = False
    try:
        await _run_tasks(plan, driver, stop, tally, gated)
    except* Exception:
        # The failed task has been logged by its guard; the others were cancelled.
        failed = True
    if haproxy is not None:
        haproxy.close()
    await runner.cleanup()
    if failed:
        log.error("the server failed; exiting")
        return EXIT_FAILURE
    _log_summary(driver, engine, tally)
    if gated is not None:
        counts = gated.counts
        log.info(
            "gate: %d requests waited (%.1f s in all), %d refused with a 503",
            counts.waited,
            counts.waited_s,
            counts.refused,
        )
    if plan.summary is not None:
        gate = None if gated is None else gated.counts.line(gated.gate.cap)
        _write_summary(plan, driver, ledger, tally, ready_at, gate=gate)
    return EXIT_OK


def _gated_load(
    plan: ServePlan, driver: RealTimeDriver, ledger: RunLedger, tally: LoadTally
) -> GatedLoad | None:
    """The gate in front of the replayed load (``--gate-socket``), at its kept cap or open."""
    if plan.gate is None:
        return None
    kept = KeptCap(plan.gate.state) if plan.gate.state is not None else None
    cap = (kept.read() if kept is not None else None) or plan.settings.max_num_seqs
    gated = GatedLoad(driver, cap, plan.gate.queue_timeout_s, tally, ledger.observe, kept=kept)

    def finished(record: FinishedRequest) -> None:
        if not gated.finished(record):
            ledger.observe(record)

    driver.on_finished = finished
    return gated


async def _stopped_while_loading(plan: ServePlan, stop: asyncio.Event) -> bool:
    """Keep the port closed for the loading time; True if a signal came meanwhile."""
    settings = plan.settings
    # vLLM's API server states what it parsed in this form; the governor reads it back.
    log.info("non-default args: %s", plan.given)
    log.info(
        "loading %s (profile %s, max-num-seqs %d, max-num-batched-tokens %d) for %.1f s; "
        "port %d stays closed until then",
        settings.served_model_name,
        plan.profile.name,
        settings.max_num_seqs,
        settings.max_num_batched_tokens,
        plan.loading_s,
        plan.port,
    )
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(plan.loading_s):
            await stop.wait()
    return stop.is_set()


async def _listen(plan: ServePlan, api: VllmApi) -> web.AppRunner | None:
    """Open the port; None (logged) when it cannot be bound."""
    runner = web.AppRunner(
        api.app(),
        access_log=None,
        # A client that hangs up cancels its handler, which aborts its request, as in vLLM.
        handler_cancellation=True,
        shutdown_timeout=_HTTP_SHUTDOWN_TIMEOUT_S,
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, plan.host, plan.port).start()
    except OSError as exc:
        log.error("cannot listen on %s:%d: %s", plan.host, plan.port, exc)  # noqa: TRY400
        await runner.cleanup()
        return None
    model = plan.settings.served_model_name
    log.info("ready: serving %s on http://%s:%d", model, plan.host, plan.port)
    return runner


async def _run_tasks(
    plan: ServePlan,
    driver: RealTimeDriver,
    stop: asyncio.Event,
    tally: LoadTally,
    gated: GatedLoad | None,
) -> None:
    """Run the driver (and the load, and its gate) until SIGTERM, then drain."""
    async with asyncio.TaskGroup() as tasks:
        engine_driver = _guarded("engine driver", driver.run(), until=stop)
        tasks.create_task(engine_driver, name="engine driver")
        load = None
        gate = None
        if gated is not None:
            coroutine = _guarded("gate", gated.run(), until=stop)
            gate = tasks.create_task(coroutine, name="gate")
        if plan.arrivals:
            origin = driver.clock.now()
            if plan.load_origin is not None:
                origin -= time.time() - plan.load_origin
            log.info("load: replaying %s (%d arrivals)", plan.load_name, len(plan.arrivals))
            coroutine = replay(driver, plan.arrivals, origin, tally, gated)
            load = tasks.create_task(_guarded("load replay", coroutine), name="load replay")
        await stop.wait()
        timeout = plan.settings.shutdown_timeout
        in_flight = driver.engine.snapshot(driver.clock.now())
        log.info(
            "stopping: %s %d running and %d waiting requests; new requests get 500",
            f"draining for up to {timeout} s" if timeout else "aborting",
            in_flight.num_running,
            in_flight.num_waiting,
        )
        # The load keeps arriving while the engine drains: its requests are refused, as
        # real clients' would be.
        await driver.shutdown()
        if load is not None:
            load.cancel()
        if gate is not None:
            gate.cancel()
    if gated is not None:
        gated.close()


async def _guarded(
    name: str, coroutine: Coroutine[Any, Any, None], *, until: asyncio.Event | None = None
) -> None:
    """Log a task's crash under its name, and its end before ``until`` is set.

    Either fails the task group, which then stops the server.
    """
    try:
        await coroutine
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("task crashed: %s", name)
        raise
    if until is not None and not until.is_set():
        log.error("task finished unexpectedly: %s", name)
        message = f"{name} finished before the server was told to stop"
        raise RuntimeError(message)


def _on_signal(signum: signal.Signals, stop: asyncio.Event) -> None:
    if stop.is_set():
        log.info("%s again: still stopping", signum.name)
    stop.set()


def _registry() -> CollectorRegistry:
    """A registry of its own with the process and runtime collectors real vLLM also shows."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


def _write_summary(
    plan: ServePlan,
    driver: RealTimeDriver,
    ledger: RunLedger,
    tally: LoadTally,
    ready_at: float,
    *,
    gate: dict[str, Any] | None,
) -> None:
    """Append this process's line to ``--summary`` (see :mod:`simulator.server.run_summary`)."""
    assert plan.summary is not None
    ledger.given_up_s = driver.given_up_s
    totals = driver.engine.lifetime_totals(driver.clock.now())
    load = None
    if plan.arrivals:
        handled = tally.submitted + tally.rejected.total()
        load = {
            "name": plan.load_name,
            "total": tally.total,
            "first": tally.missed,
            "next": tally.missed + handled,
            "submitted": tally.submitted,
            "rejected": dict(tally.rejected),
        }
    _append(
        plan,
        _settings_of(plan),
        ready_at,
        ledger=ledger,
        preemptions=totals.preemptions,
        load=load,
        gate=gate,
    )


def _settings_of(plan: ServePlan) -> dict[str, Any]:
    settings = plan.settings
    return {
        "max_num_seqs": settings.max_num_seqs,
        "max_num_batched_tokens": settings.max_num_batched_tokens,
        "num_gpu_blocks": settings.num_gpu_blocks,
    }


def _append(
    plan: ServePlan,
    settings: dict[str, Any],
    ready_at: float | None,
    *,
    ledger: RunLedger,
    preemptions: int,
    load: dict[str, Any] | None,
    gate: dict[str, Any] | None = None,
) -> None:
    """Append one line to ``--summary``; a process stopped while loading has ``ready_at`` None."""
    assert plan.summary is not None
    line = summary_line(
        ledger,
        settings=settings,
        ready_at=ready_at,
        stopped_at=time.time(),
        preemptions=preemptions,
        load=load,
        gate=gate,
    )
    try:
        append_summary(plan.summary, line)
    except OSError as exc:
        log.error("cannot write the summary to %s: %s", plan.summary, exc)  # noqa: TRY400


def _log_summary(driver: RealTimeDriver, engine: Engine, tally: LoadTally) -> None:
    now = driver.clock.now()
    totals = engine.lifetime_totals(now)
    outcomes = totals.outcomes
    log.info(
        "stopped after %.1f s: %d completed, %d aborted, %d rejected requests; "
        "%d preemptions; %d steps, engine busy %.1f s (%.0f%%), %.3f s given up to lag",
        now,
        outcomes["completed"],
        outcomes["aborted"],
        outcomes["rejected"],
        totals.preemptions,
        driver.steps,
        driver.busy_s,
        100 * driver.busy_s / now if now > 0 else 0.0,
        driver.given_up_s,
    )
    if tally.total:
        log.info("%s", tally.summary())
