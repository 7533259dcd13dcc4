"""The fleet, from the governor's side: what it registers, and the tasks that keep it there.

Built by the composition root only when ``[fleet]`` is enabled. The records come from what the
governor already knows: the configuration (instances, groups), the actuator's reading of each
server's files (knobs), and the signal plane's scrapes (health, and the version ``/version``
reported).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Mapping

from daemon.core.clock import Clock
from daemon.core.fleet_settings import Budget, budget_slots
from daemon.core.settings import GovernorConfig
from daemon.engine.evaluation.signal_plane import SignalPlane
from daemon.engine.runtime.supervisor import EternalTask
from daemon.fleet.etcd_gateway import EtcdGateway
from daemon.fleet.freeze_watch import FleetFreezeWatch
from daemon.fleet.freeze_writes import FleetFreezer
from daemon.fleet.keys import FleetKeys
from daemon.fleet.records import MemberRecord
from daemon.fleet.registrar import Registrar
from daemon.fleet.restart_slots import FleetRestartSlots
from daemon.fleet.rollout_driver import RolloutDriver
from daemon.fleet.rollout_state import Rollout
from daemon.fleet.rollout_store import RolloutStore
from daemon.sources.health import SourceState

KnobsOf = Callable[[], Mapping[str, Mapping[str, float]]]


class FleetPlane:
    """This governor as a member of the fleet.

    Args:
        config: The configuration in force (read at each refresh: reloads are seen).
        signals: The signal plane (health and version of each server).
        knobs: The current knob values of each server.
        clock: The injected clock.
    """

    def __init__(
        self,
        config: Callable[[], GovernorConfig],
        signals: SignalPlane,
        knobs: KnobsOf,
        clock: Clock,
    ) -> None:
        section = config().fleet
        self._config = config
        self._signals = signals
        self._knobs = knobs
        self.host = section.host or socket.gethostname()
        self.client = EtcdGateway(section.endpoints, section.request_timeout_s)
        self.keys = FleetKeys(section.prefix)
        self.freezer = FleetFreezer(self.client, self.keys)
        self.registrar = Registrar(
            self.client,
            self.keys,
            ttl_s=section.lease_ttl_s,
            refresh_s=section.refresh_s,
            facts=self.records,
            clock=clock,
        )
        # The fleet's freezes, for every change's preflight; past one lease's life without a
        # reading, the fleet's state counts as unknown (no restarts).
        self.freezes = FleetFreezeWatch(
            self.client,
            self.keys,
            group_of=self._group_of,
            refresh_s=section.refresh_s,
            stale_after_s=section.lease_ttl_s,
            clock=clock,
        )

        # The disruption budget: slots bound to the registrar's lease, so that a governor
        # that dies frees its slots when its registration goes.
        self.slots = FleetRestartSlots(
            self.client,
            self.keys,
            host=self.host,
            lease=lambda: self.registrar.lease,
            group_of=self._group_of,
            budget_of=self._budget_of,
            wait_s=section.slot_wait_s,
            poll_s=section.refresh_s,
            clock=clock,
        )
        # Group changes: rollouts in etcd, driven by whichever governor holds a rollout's
        # driver key (bound to the registrar's lease, so a dead driver's key goes with it).
        self.rollouts = RolloutStore(self.client, self.keys)
        # Every state this governor's driver writes, for the thread of the rollout's proposal
        # (the composition root hands it to the task that posts there).
        self.moves: asyncio.Queue[Rollout] = asyncio.Queue()
        self.driver = RolloutDriver(
            self.rollouts,
            host=self.host,
            lease=lambda: self.registrar.lease,
            slots_of=self._slots_of,
            clock=clock,
            poll_s=section.refresh_s,
            moved=self.moves.put_nowait,
        )

    def tasks(self) -> list[EternalTask]:
        """The registrar, the freeze watch, the restart slots' keeper, the rollout driver."""
        return [
            EternalTask("fleet registrar", lambda ready: self.registrar.run(ready.started)),
            EternalTask("fleet freeze watch", lambda ready: self.freezes.run(ready.started)),
            EternalTask("fleet slot keeper", lambda ready: self.slots.run(ready.started)),
            EternalTask("fleet rollout driver", lambda ready: self.driver.run(ready.started)),
        ]

    def status(self) -> dict[str, object]:
        """This governor as a fleet member, for ``vllm-governor status``."""
        lease = self.registrar.lease
        return {
            "host": self.host,
            "endpoints": list(self.client.endpoints),
            "registered": self.registrar.reachable is True,
            "lease": f"{lease:x}" if lease else "",
            "registration_error": self.registrar.last_error,
            "freeze_watch": self.freezes.status(),
        }

    def records(self) -> list[MemberRecord]:
        """One record per configured vLLM instance, as the governor sees it now."""
        config = self._config()
        knobs = self._knobs()
        return [
            MemberRecord(
                host=self.host,
                instance=instance.name,
                group=config.fleet.group_of(instance.name),
                vllm_version=self._version(instance.name),
                knobs=dict(knobs.get(instance.name, {})),
                health=self._health(instance.name),
            )
            for instance in config.vllm
        ]

    def group_of(self, instance: str) -> str:
        """The fleet group of ``instance``."""
        return self._config().fleet.group_of(instance)

    def _group_of(self, instance: str) -> str:
        return self.group_of(instance)

    def _slots_of(self, group: str, size: int) -> int:
        return budget_slots(self._budget_of(group), size)

    def _budget_of(self, group: str) -> Budget:
        return self._config().fleet.budget_of(group)

    def _health(self, instance: str) -> str:
        health = self._signals.health.get(f"vllm/{instance}")
        if health is None or health.state is SourceState.STARTING:
            return "unknown"
        if health.state is SourceState.DOWN or health.detail == "unhealthy":
            return "down"
        return "up"

    def _version(self, instance: str) -> str:
        keys = self._signals.store.keys("vllm_version_info", instance=instance)
        return (keys[-1].label("version") or "") if keys else ""
