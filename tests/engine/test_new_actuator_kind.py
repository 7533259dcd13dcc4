"""A new actuator is one module and one table entry: the engine drives it like the shipped ones.

The kind below lives in this test file only: a no-op live actuator that keeps a log level in
memory. It is registered through the table the governor takes (``kinds``), in place of the
HTTP one on the ``[[http_log_level]]`` section, and nothing of the engine is touched: the
whole Governor, in virtual time, reads its knob through the kind's reader, a policy fires on
it, the router sends the intent to the kind that owns the target, its runner applies it, and
the outcome is counted like any other change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from actuators.kinds import VLLM
from daemon.api import (
    DONE,
    LOG_LEVEL_KNOB,
    ActuationResult,
    ActuatorKind,
    ActuatorServices,
    Capabilities,
    ChangeRequest,
    HttpLogLevelTarget,
)
from daemon.core.config_files import load_config
from daemon.core.virtual_time import EPOCH, VirtualClock, run_in_virtual_time
from daemon.engine.governor import Governor, LoadedConfig
from daemon.engine.runtime.service_manager import NoServiceManager
from tests.support.daemon import write_config

RUN_S = 120.0


@dataclass
class NoopLiveActuator:
    """Sets a level in memory: live, nothing journaled, nothing to set back."""

    level: float = 20.0
    refreshed: int = 0
    applied: list[ChangeRequest] = field(default_factory=list)

    def current_knobs(self, target: HttpLogLevelTarget) -> Mapping[str, float]:
        return {LOG_LEVEL_KNOB: self.level} if self.refreshed else {}

    async def refresh(self, target: HttpLogLevelTarget) -> None:
        self.refreshed += 1

    async def apply(
        self, target: HttpLogLevelTarget, request: ChangeRequest, *, dry_run: bool = False
    ) -> ActuationResult:
        self.applied.append(request)
        self.level = request.changes[LOG_LEVEL_KNOB]
        return ActuationResult(target.name, request.policy, DONE, "set in memory", request.changes)

    async def reconcile(self, target: HttpLogLevelTarget) -> ActuationResult | None:
        return None


def noop_kind(actuator: NoopLiveActuator) -> ActuatorKind[HttpLogLevelTarget]:
    """The one table entry a new kind needs."""

    def build(_services: ActuatorServices) -> NoopLiveActuator:
        return actuator

    return ActuatorKind(
        name="noop_log_level",
        section="[[http_log_level]]",
        title="no-op live",
        task="no-op level",
        targets=lambda config: config.http_log_level,
        factory=build,
        capabilities=Capabilities(live=True, journals=False, revertible=False),
        knobs=frozenset({LOG_LEVEL_KNOB}),
        poll_interval_s=lambda target: target.poll_interval_s,
    )


def _configure(directory: Path) -> Path:
    policies = directory / "policies"
    policies.mkdir()
    (policies / "quieter.yaml").write_text(
        "name: quieter\ntargets: [quiet]\nwhen: 'true'\naction: {set: {log_level: 40}}\n"
    )
    target = (
        "[[http_log_level]]\n"
        'name = "quiet"\n'
        'url = "http://127.0.0.1:9/logging?level={level}"\n'  # never called: the kind is no-op
        'levels = { INFO = "info", ERROR = "error" }\n'
        "poll_interval_s = 5.0\n"
        "[http_log_level.knob]\nmin = 20\nmax = 40\nmax_step = 20\nmin_dwell_s = 0\n"
    )
    config = write_config(directory, extra=target)
    text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
    text = text.replace("[metrics]\n", "[metrics]\nenabled = false\n")
    config.write_text(text + "[sources.nvml]\nenabled = false\n[sources.host]\nenabled = false\n")
    return config


def test_a_kind_registered_in_the_table_alone_is_driven_end_to_end(short_tmp: Path) -> None:
    config_path = _configure(short_tmp)
    actuator = NoopLiveActuator()

    async def main() -> float | None:
        loop = asyncio.get_running_loop()
        clock = VirtualClock(loop, EPOCH)
        loaded = LoadedConfig(load_config(config_path), config_path, clock.wall())
        governor = Governor(loaded, clock, NoServiceManager(), kinds=(VLLM, noop_kind(actuator)))
        async with asyncio.TaskGroup() as group:
            governing = group.create_task(governor.run(), name="governor")
            await asyncio.sleep(RUN_S)
            counted = governor.metrics.registry.get_sample_value(
                "vllm_governor_actuations_total", {"target": "quiet", "state": "done"}
            )
            governor.request_stop()
            await governing
        return counted

    counted = run_in_virtual_time(main())
    assert actuator.refreshed > 1, "the kind's reader polled it"
    [request] = actuator.applied
    assert request.changes == {LOG_LEVEL_KNOB: 40.0}
    assert request.current == {LOG_LEVEL_KNOB: 20.0}, "the policy read the kind's knob"
    assert request.risk == "auto"
    assert counted == 1.0, "its outcome was reported like any change"
    assert actuator.level == 40.0
