"""A reconcile deferred at start is tried again while the governor runs, on a bounded backoff.

The actuation plane runs for real on a virtual-time loop (minutes of retries pass at once);
the vLLM kind's actuator is a stand-in whose reconcile of ``main`` is deferred a given number
of times, as the real one's is while its group's restart slots are taken, then finishes.
Before, the plane tried a deferred reconcile once, at start, and left it for the next start.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from actuators.kinds import VLLM
from daemon.app.commands.status import render
from daemon.core.actuation import DONE, REFUSED, ActuationResult, ChangeRequest, JournalState
from daemon.core.settings import (
    GovernorConfig,
    GovernorSection,
    HostSourceSection,
    NvmlSourceSection,
    SourcesSection,
    VllmInstance,
)
from daemon.core.virtual_time import EPOCH, VirtualClock, run_in_virtual_time
from daemon.engine.actuation.actuation_plane import ActuationPlane
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.runtime.supervisor import EternalTask, Readiness

DEFERRED = "reconcile deferred (restart_slot): no restart slot free in group llama"


@dataclass
class DeferringActuator:
    """Reconciles ``main``'s open change only after ``deferrals`` deferred tries."""

    deferrals: int
    tries: list[float] = field(default_factory=list)  # loop times of main's reconciles
    applied: list[tuple[str, float]] = field(default_factory=list)
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def current_knobs(self, instance: VllmInstance) -> Mapping[str, float]:
        return {"max_num_seqs": 8.0}

    async def refresh(self, instance: VllmInstance) -> None:
        """Nothing to read."""

    async def apply(
        self, instance: VllmInstance, request: ChangeRequest, *, dry_run: bool = False
    ) -> ActuationResult:
        self.applied.append((instance.name, asyncio.get_running_loop().time()))
        return ActuationResult(request.target, request.policy, DONE, "applied and verified")

    async def reconcile(self, instance: VllmInstance) -> ActuationResult | None:
        if instance.name != "main":
            return None  # nothing left open
        self.tries.append(asyncio.get_running_loop().time())
        if len(self.tries) <= self.deferrals:
            deferred = _result(REFUSED, f"{DEFERRED}; the change stays open")
            return replace(deferred, refusals=(("restart_slot", DEFERRED),))
        self.finished.set()
        return _result(DONE, "applied and verified")


def _result(state: JournalState, outcome: str) -> ActuationResult:
    return ActuationResult("main", "shrink", state, outcome, entry_id=7)


def _config(state_dir: Path) -> GovernorConfig:
    servers = tuple(
        VllmInstance(
            name=name,
            url="http://127.0.0.1:9",
            unit=f"vllm@{name}.service",
            config_path=state_dir / f"{name}.yaml",
        )
        for name in ("main", "other")
    )
    return GovernorConfig(
        governor=GovernorSection(state_dir=state_dir, policy_dirs=()),
        sources=SourcesSection(
            nvml=NvmlSourceSection(enabled=False), host=HostSourceSection(enabled=False)
        ),
        vllm=servers,
    )


async def _run(
    state_dir: Path, actuator: DeferringActuator, registry: CollectorRegistry
) -> list[dict[str, Any]]:
    """The plane until main's reconcile finished; what status said of it after 1 s."""
    config = _config(state_dir)
    clock = VirtualClock(asyncio.get_running_loop(), EPOCH)
    plane = ActuationPlane(
        lambda: config,
        SignalPlane(config, clock, registry),
        clock,
        registry,
        state_dir / "state.sqlite3",
        kinds=(replace(VLLM, factory=lambda _services: actuator),),
        on_applied=lambda _result: None,
        record=lambda _decisions: None,
    )

    async def run(task: EternalTask) -> None:
        await task.run(Readiness())

    tasks = [asyncio.create_task(run(task), name=task.name) for task in plane.tasks()]
    try:
        await asyncio.sleep(1)  # the start's reconciles are done: main's deferred once
        seen: list[dict[str, Any]] = plane.status()["reconciles_deferred"]
        other = plane.owners()["other"]
        plane.enqueue(other, ChangeRequest("other", "grow", {"max_num_seqs": 16}, {}))
        async with asyncio.timeout(3600):  # virtual: a governor that never retries fails here
            await actuator.finished.wait()
        await asyncio.sleep(1)  # its outcome reported
        assert plane.status()["reconciles_deferred"] == []
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        plane.close()
    return seen


def test_a_deferred_reconcile_is_tried_again_on_a_bounded_backoff(tmp_path: Path) -> None:
    actuator = DeferringActuator(deferrals=6)
    registry = CollectorRegistry()
    seen = run_in_virtual_time(_run(tmp_path, actuator, registry))

    # Tried at start, then again six times: the last one finishes it.
    assert len(actuator.tries) == 7
    assert actuator.tries[0] == 0.0
    gaps = [later - earlier for earlier, later in itertools.pairwise(actuator.tries)]
    bounds = [10.0, 20.0, 40.0, 80.0, 120.0, 120.0]  # doubling from 10 s, capped at 120 s
    for gap, bound in zip(gaps, bounds, strict=True):
        assert bound / 2 <= gap <= bound, (gaps, bounds)
    # Every try's outcome is reported (counted, logged) as the start's was.
    changes = "vllm_governor_actuations_total"
    assert registry.get_sample_value(changes, {"target": "main", "state": "refused"}) == 6
    assert registry.get_sample_value(changes, {"target": "main", "state": "done"}) == 1
    refusals = "vllm_governor_actuation_refusals_total"
    assert registry.get_sample_value(refusals, {"target": "main", "guard": "restart_slot"}) == 6

    # Meanwhile status says what waits, and when it is tried next.
    (waiting,) = seen
    assert {k: waiting[k] for k in ("target", "entry", "tries")} == {
        "target": "main",
        "entry": 7,
        "tries": 1,
    }
    assert waiting["reason"].startswith(DEFERRED)
    next_at = datetime.fromisoformat(waiting["next_at"])
    assert EPOCH + timedelta(seconds=gaps[0]) == next_at

    text = render({"version": "test", "pid": 1, "state": "running", "uptime_s": 1.0,
                   "config_path": "config.toml", "reconciles_deferred": seen})  # fmt: skip
    assert "changes left open, their reconcile deferred (tried again on a schedule):" in text
    next_text = next_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert f"  #7 on main: 1 try deferred, next at {next_text}: {DEFERRED}" in text

    # Another instance's change was not held up by main's deferral.
    assert actuator.applied == [("other", 1.0)]
