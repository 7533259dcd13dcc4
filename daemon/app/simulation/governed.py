"""A simulated run governed by the daemon itself: the same Governor as ``run``, other adapters.

``simulate``'s ``governor`` (and ``governor-restart-only``) is the daemon's own composition
(:class:`daemon.engine.governor.Governor`: signal plane, policies, evaluator, router, the vLLM
actuator's whole protocol, approvals with the click-time re-check, the admission loop), built
in-process on a :class:`~daemon.core.virtual_time.VirtualTimeLoop`. It differs from the daemon
only in what is plugged into its ports:

- **clock**: the loop's virtual clock, from :data:`EPOCH` (a Monday, 00:00);
- **the server**: a :class:`~simulator.server.virtual_host.VirtualHost` over the run, scraped
  and probed over loopback HTTP (:mod:`simulator.server.virtual_face`), its config file and
  log in a scratch directory;
- **the service manager**: the restart command restarts the simulated engine into what the
  file says (:class:`HostRestart`), in place of ``systemctl``;
- **the gate**: HAProxy's runtime API over the run's gate, on a Unix socket
  (:mod:`simulator.server.virtual_haproxy`); ``governor-restart-only`` runs without one;
- **the batch lane's HTTP client**: the engine's completions endpoint in-process
  (:class:`~daemon.app.simulation.engine_exchange.EngineExchange`), so the governor's batch
  jobs reach the engine as its own requests, at the priority the lane gives them;
- **approvals**: a simulated approver clicking through the approvals' chat port
  (:mod:`daemon.app.simulation.approver`);
- **vLLM's own parser check**: none (the simulator's settings check refuses what vLLM would).

What the governor did is read back from its own journals (:mod:`daemon.app.simulation.journals`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from actuators.kinds import HAPROXY_GATE, VLLM, vllm_actuator
from actuators.vllm.actuator import VllmActuator
from actuators.vllm.restart import CommandResult
from daemon.api import ActuatorServices, Clock
from daemon.app.simulation.approver import SimulatedApprover
from daemon.app.simulation.clock import EPOCH
from daemon.app.simulation.engine_exchange import EngineExchange
from daemon.app.simulation.events import EventLog
from daemon.app.simulation.journals import read_events
from daemon.app.simulation.sandbox import Sandbox, sandboxed
from daemon.core.settings import GovernorConfig
from daemon.core.virtual_time import VirtualClock, run_in_virtual_time
from daemon.engine.evaluation.tuner import IN_PROCESS
from daemon.engine.governor import Governor, LoadedConfig
from daemon.engine.runtime.service_manager import NoServiceManager
from simulator.errors import SpecError
from simulator.server.virtual_face import serve_face
from simulator.server.virtual_haproxy import VirtualHaproxy, run_gate, serve_haproxy
from simulator.server.virtual_host import VirtualHost, engine_settings_yaml
from simulator.virtual_time import VirtualRun

log = logging.getLogger(__name__)

# The restart command of the simulated instance: only this one is run (as systemctl would
# refuse an unknown unit).
RESTART_COMMAND = ("simulated-restart", "{unit}")


class HostRestart:
    """The service manager of the simulated host: its restart command restarts the engine."""

    def __init__(self, host: VirtualHost, unit: str) -> None:
        self._host = host
        self._argv = tuple(word.replace("{unit}", unit) for word in RESTART_COMMAND)

    async def __call__(self, argv: Sequence[str], timeout_s: float, clock: Clock) -> CommandResult:
        """Restart as ``systemctl restart`` would: 0 once the server is on its way back."""
        del timeout_s  # the engine's restart never hangs
        arguments = tuple(argv)
        if arguments != self._argv:
            return CommandResult(arguments, 1, f"unknown command {list(arguments)}", 0.0)
        try:
            self._host.restart()
        except (SpecError, RuntimeError) as exc:
            return CommandResult(arguments, 1, str(exc), 0.0)
        return CommandResult(arguments, 0, "", 0.0)


@dataclass(frozen=True, slots=True)
class Governing:
    """How a governed run goes.

    Attributes:
        duration_s: Virtual seconds the governor runs for (the workload's duration).
        gated: Whether the server has a gate (HAProxy) the admission loop moves.
        approval_delay_s: Seconds from a proposal to the simulated click.
        approve: What the click is: approve (True) or reject.
        tick_s: How often the world is brought up to the clock when nobody looks (a batch
            request's answer reaches the lane at the next tick at the latest).
        on_tick: Called after each tick with the sandbox and the batch lane's server (a
            simulation drops batch jobs into the inbox from there, and samples the lane).
    """

    duration_s: float
    gated: bool
    approval_delay_s: float
    approve: bool
    tick_s: float = 1.0
    on_tick: Callable[[Sandbox, EngineExchange], None] | None = field(default=None)


def govern(run: VirtualRun, host_files: Path, config: GovernorConfig, how: Governing) -> EventLog:
    """Run the daemon's Governor over ``run`` for ``how.duration_s`` virtual seconds.

    ``host_files`` is a scratch directory; the run's engine must already have the settings its
    config file (written there) says. Returns what the governor did, from its journals.
    """
    return run_in_virtual_time(_govern(run, host_files, config, how))


async def _govern(run: VirtualRun, files: Path, config: GovernorConfig, how: Governing) -> EventLog:
    loop = asyncio.get_running_loop()
    clock = VirtualClock(loop, EPOCH)
    sandbox = Sandbox(files)
    sandbox.vllm_yaml.write_text(engine_settings_yaml(run.engine.settings))
    host = VirtualHost(
        run, run.engine.profile, sandbox.vllm_yaml, EPOCH.timestamp(), sandbox.server_log
    )
    face, port = await serve_face(host, "127.0.0.1")
    haproxy = None
    if how.gated:
        haproxy = await serve_haproxy(
            VirtualHaproxy(run_gate(host), sandbox.backend, sandbox.server), sandbox.haproxy_socket
        )
    governed = sandboxed(config, sandbox, port, RESTART_COMMAND, gated=how.gated)
    instance = governed.vllm[0]
    restart = HostRestart(host, instance.unit)
    exchange = EngineExchange(host)

    def actuator(services: ActuatorServices) -> VllmActuator:
        return vllm_actuator(services, restart_runner=restart, objection=_no_objection)

    loaded = LoadedConfig(governed, sandbox.config_path, clock.wall())
    governor = Governor(
        loaded,
        clock,
        NoServiceManager(),
        # The daemon's table, with the restart run on the simulated host.
        kinds=(replace(VLLM, factory=actuator), HAPROXY_GATE),
        # On the virtual clock a worker process would run in real time while the clock jumps.
        whatif=IN_PROCESS,
        batch_exchange=exchange,
    )
    events = EventLog()
    approver = SimulatedApprover(
        governor.approval_desk, clock, events, delay_s=how.approval_delay_s, approve=how.approve
    )
    try:
        async with asyncio.TaskGroup() as group:
            governing = group.create_task(governor.run(), name="governor")
            approving = group.create_task(approver.run(), name="simulated approver")
            while loop.time() < how.duration_s and not governing.done():
                await asyncio.sleep(min(how.tick_s, how.duration_s - loop.time()))
                host.sync()  # the world moves on whether or not anybody looks
                if how.on_tick is not None:
                    how.on_tick(sandbox, exchange)
            governor.request_stop()
            await governing
            approving.cancel()
    finally:
        await face.cleanup()
        if haproxy is not None:
            haproxy.close()
            with contextlib.suppress(OSError):
                await haproxy.wait_closed()
    return read_events(sandbox.state_dir, instance.name, events)


async def _no_objection(_args: str, _clock: Clock, _python: Path | None) -> str:
    """VLLM's parser is not run in simulation: the simulator's own settings check stands in."""
    return ""


def scratch_directory() -> tempfile.TemporaryDirectory[str]:
    """A short-named scratch directory (Unix socket paths are limited to 107 bytes)."""
    return tempfile.TemporaryDirectory(prefix="vg-sim-", dir="/tmp")
