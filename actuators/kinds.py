"""The table of actuator kinds: each kind's settings section, factory and capabilities.

The governor drives whatever this table holds (``vllm-governor run`` hands it
:data:`KINDS`; ``simulate`` the same table with the vLLM entry's restart runner swapped for
the simulated host's). Adding an actuator is one module (the actuator, speaking
:class:`daemon.api.Actuator`) and one entry here. Order matters only where two routed kinds
read the same section: the first one that lists a target owns its intents. The admission
gate's entry is not routed: the engine's admission loop moves its cap through ``apply``.
"""

from __future__ import annotations

from typing import Any

from actuators.haproxy.actuator import HaproxyActuator
from actuators.http_log_level.actuator import HttpLogLevelActuator
from actuators.vllm.actuator import Objection, VllmActuator
from actuators.vllm.restart import CommandRunner, run_command
from actuators.vllm.vllm_args import vllm_objection
from daemon.api import (
    GATE_CAP_KNOB,
    LOG_LEVEL_KNOB,
    ActuatorKind,
    ActuatorServices,
    Capabilities,
    GovernorConfig,
    HttpLogLevelTarget,
    VllmInstance,
)


def _actuated_servers(config: GovernorConfig) -> tuple[VllmInstance, ...]:
    """The ``[[vllm]]`` servers whose files the governor may change (a ``config_path``)."""
    return tuple(instance for instance in config.vllm if instance.config_path is not None)


def _vllm(services: ActuatorServices) -> VllmActuator:
    return vllm_actuator(services)


def vllm_actuator(
    services: ActuatorServices,
    *,
    restart_runner: CommandRunner = run_command,
    objection: Objection = vllm_objection,
) -> VllmActuator:
    """The vLLM actuator on everything the engine lends, with the host's two seams.

    ``simulate`` swaps the restart (the simulated host restarts the engine) and vLLM's parser
    (the simulator's settings check stands in); every other service, the batch lane's hold,
    the fleet's freeze and its restart slots included, is the daemon's, from one place.
    """
    return VllmActuator(
        services.journal,
        services.windows,
        services.clock,
        services.freeze_dir,
        services.gates,
        restart_runner=restart_runner,
        objection=objection,
        batches=services.batches,
        fleet_freeze=services.fleet_freeze,
        restart_slots=services.restart_slots,
    )


def _gated_servers(config: GovernorConfig) -> tuple[VllmInstance, ...]:
    """The ``[[vllm]]`` servers with an admission gate in front (``[vllm.gate]`` enabled)."""
    return tuple(instance for instance in config.vllm if instance.gate.enabled)


def _gate(services: ActuatorServices) -> HaproxyActuator:
    if services.caps is None:
        message = "the admission gate's actuator needs the engine's cap journal (services.caps)"
        raise TypeError(message)
    return HaproxyActuator(
        services.caps,
        services.clock,
        services.freeze_dir,
        gates=services.gate_caps,
        changes=services.journal,
        fleet_freeze=services.fleet_freeze,
    )


def _log_levels(services: ActuatorServices) -> HttpLogLevelActuator:
    return HttpLogLevelActuator(
        services.journal,
        services.clock,
        services.freeze_dir,
        fleet_freeze=services.fleet_freeze,
    )


VLLM: ActuatorKind[VllmInstance] = ActuatorKind(
    name="vllm",
    section="[[vllm]]",
    title="vLLM",
    task="actuation",
    targets=_actuated_servers,
    factory=_vllm,
    # Every knob is a startup flag: a change is a restart, verified and reverted on failure.
    capabilities=Capabilities(live=False, journals=True, revertible=True),
    operations=frozenset({"restart"}),
)

HTTP_LOG_LEVEL: ActuatorKind[HttpLogLevelTarget] = ActuatorKind(
    name="http_log_level",
    section="[[http_log_level]]",
    title="live log-level",
    task="log level",
    targets=lambda config: config.http_log_level,
    factory=_log_levels,
    capabilities=Capabilities(live=True, journals=True, revertible=True),
    knobs=frozenset({LOG_LEVEL_KNOB}),
    poll_interval_s=lambda target: target.poll_interval_s,
)

HAPROXY_GATE: ActuatorKind[VllmInstance] = ActuatorKind(
    name="haproxy_gate",
    section="[vllm.gate]",
    title="admission gate",
    task="admission gate",
    targets=_gated_servers,
    factory=_gate,
    # The cap (HAProxy's maxconn) moves live, is read back, and is set back when it is not.
    capabilities=Capabilities(live=True, journals=True, revertible=True),
    knobs=frozenset({GATE_CAP_KNOB}),
    routed=False,
)

KINDS: tuple[ActuatorKind[Any], ...] = (VLLM, HTTP_LOG_LEVEL, HAPROXY_GATE)
