"""The batch lane steerer: sets each target's lane from the batch policies, every second.

The evaluator decides whether a batch policy fires; this task reads those states and sets the
lane's width (:func:`daemon.policy.batch_lane.lane_width`), within ``[batch] concurrency``.
Moving the lane is a live change of what the governor sends to vLLM, so it passes the checks
the other live changes pass, in this order:

- **One change in flight.** While a change of the target is in flight (an open journal entry:
  a restart being drained, restarted, verified), the lane is closed: a batch request must not
  hold the drain up, nor meet a server that is going away. It opens again, as the policies say,
  once the entry is finished.
- **Freeze.** A frozen target's lane holds: it may narrow or close (the safer way) but never
  open or widen, as a freeze holds an admission cap where it is.

A target no batch policy watches runs at ``[batch] concurrency`` (the lane as it was before
policies could move it), through the same checks.

The server's scheduling policy (:mod:`daemon.batch.scheduling`, re-read every
:data:`SCHEDULING_TTL_S` and after every change of the server) decides the rest: under
``priority`` the lane's requests carry ``[batch] priority``; under ``fcfs`` (or unknown) they
carry none and a lane a policy opens is bound tight (:func:`daemon.policy.batch_lane.fcfs_bound`;
a lane no policy watches stays at the operator's ``[batch] concurrency``). Once the fcfs bound
has closed a lane, it stays closed for :data:`FCFS_REOPEN_S`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from prometheus_client import CollectorRegistry, Gauge

from daemon.batch.scheduling import FCFS, Scheduling, read_scheduling
from daemon.core.actuation import JournalEntry
from daemon.core.clock import Clock
from daemon.core.freezes import freeze_reason
from daemon.core.settings import GovernorConfig, VllmInstance
from daemon.engine.batches.lanes import BatchLanes, Lane
from daemon.engine.runtime.supervisor import Readiness
from daemon.policy.batch_lane import LaneWidth, batch_policies, fcfs_bound, lane_width
from daemon.policy.evaluate import TargetView
from daemon.policy.spec import PolicySpec
from daemon.policy.state import Phase, PolicyState

log = logging.getLogger(__name__)

TICK_S = 1.0  # how often the lanes are looked at: a lane narrows within about this long
SCHEDULING_TTL_S = 30.0  # how long a server's scheduling policy is taken as read
# Under fcfs, how long the lane stays closed after a request was last seen waiting: waiting
# flickers around 0 near capacity, and each reopening would cut requests off at the next close.
FCFS_REOPEN_S = 10.0
# How long a look's views serve the next looks: they change only with a scrape (every 2 s by
# default), and building them (every signal, quantiles included) is the costly part of a look.
VIEWS_TTL_S = 2.0

# target -> a sentence naming the change in flight on it, or None when there is none.
InFlight = Callable[[str], str | None]
# A server's scheduling policy, read from its files (blocking I/O: run off the loop).
ReadScheduling = Callable[[VllmInstance], Scheduling]


def scheduling_of(instance: VllmInstance) -> Scheduling:
    """What the server's log, else its config file, says of its scheduling policy."""
    return read_scheduling(instance.server_log_file, instance.config_path)


class LaneSteerer:
    """Sets every configured target's batch lane, as the policies and the checks say.

    Args:
        config: The configuration in force.
        specs: The policies in force.
        states: The evaluator's policy states, by (policy, target).
        views: Each target's view now (only read while a batch policy fires somewhere).
        lanes: The lanes the job runners send through.
        in_flight: What change is in flight on a target (the actuation journal's open entry).
        clock: The injected clock (freeze expiries and schedules are wall-clock times).
        registry: Where the lane's gauge goes.
        read: Reads a server's scheduling policy from its files.
        views_ttl_s: How long built views serve the next looks.
    """

    def __init__(
        self,
        *,
        config: Callable[[], GovernorConfig],
        specs: Callable[[], Sequence[PolicySpec]],
        states: Callable[[], Mapping[tuple[str, str], PolicyState]],
        views: Callable[[], Mapping[str, TargetView]],
        lanes: BatchLanes,
        in_flight: InFlight,
        clock: Clock,
        registry: CollectorRegistry,
        read: ReadScheduling = scheduling_of,
        views_ttl_s: float = VIEWS_TTL_S,
    ) -> None:
        self._config = config
        self._views_ttl_s = views_ttl_s
        self._built: tuple[float, Mapping[str, TargetView]] | None = None
        self._fcfs_closed_at: dict[str, float] = {}
        self._read = read
        self._scheduling: dict[str, tuple[float, Scheduling]] = {}
        self._specs = specs
        self._states = states
        self._views = views
        self._lanes = lanes
        self._in_flight = in_flight
        self._clock = clock
        self._width = Gauge(
            "vllm_governor_batch_lane_width",
            "How many batch requests the governor may have in flight on each target now.",
            ["target"],
            registry=registry,
        )

    async def run(self, readiness: Readiness) -> None:
        """Look every :data:`TICK_S`, forever."""
        readiness.started()
        while True:
            await self.refresh_scheduling()
            self.tick_once()
            await asyncio.sleep(TICK_S)

    async def refresh_scheduling(self) -> None:
        """Read again the scheduling policy of each server not read within the TTL."""
        now = self._clock.monotonic()
        for instance in self._config().vllm:
            known = self._scheduling.get(instance.name)
            if known is None or now - known[0] >= SCHEDULING_TTL_S:
                found = await asyncio.to_thread(self._read, instance)
                self._scheduling[instance.name] = (now, found)

    def tick_once(self) -> None:
        """Set every target's lane once."""
        config = self._config()
        specs, states = self._specs(), self._states()
        ceiling = config.batch.concurrency
        views: Mapping[str, TargetView] | None = None
        for instance in config.vllm:
            target = instance.name
            lane = self._lanes.lane(target)
            view = TargetView(target, {}, {})
            if _firing(specs, states, target):
                views = self._views_now() if views is None else views
                view = views.get(target, view)
            decided = lane_width(
                specs,
                states,
                view,
                self._clock.wall(),
                current=lane.width,
                ceiling=ceiling,
                current_spacing_s=lane.spacing_s,
            )
            scheduling = self._scheduling_now(target)
            lane.scheduling = f"{scheduling.policy} ({scheduling.source})"
            lane.priority = config.batch.priority if scheduling.priority else None
            if decided is None:
                # No window: the operator's fixed number, as before policies could move it.
                decided = LaneWidth(ceiling, None, "no batch policy: at [batch] concurrency")
            elif not scheduling.priority and decided.width > 0:
                views = self._views_now() if views is None else views
                view = views.get(target, view)
                bounded = fcfs_bound(decided, view, config.batch.fcfs_share)
                decided = self._fcfs_hold(target, bounded)
            self._set(lane, self._checked(target, lane, decided, config.governor.state_dir))

    def _checked(self, target: str, lane: Lane, decided: LaneWidth, state_dir: Path) -> LaneWidth:
        """The width the checks allow: closed while a change is in flight, held when frozen."""
        change = self._in_flight(target)
        if change is not None:
            self._scheduling.pop(target, None)  # the server may come back with another one
            return LaneWidth(0, decided.policy, f"{change}: the lane waits for it, closed")
        if decided.width > lane.width:
            frozen = freeze_reason(state_dir, target, self._clock.wall())
            if frozen:
                return LaneWidth(lane.width, decided.policy, f"{frozen}: the lane may not widen")
        return decided

    def _fcfs_hold(self, target: str, bounded: LaneWidth) -> LaneWidth:
        """Keep an fcfs lane closed for :data:`FCFS_REOPEN_S` after it was closed."""
        now = self._clock.monotonic()
        if bounded.width == 0:
            self._fcfs_closed_at[target] = now
            return bounded
        closed_at = self._fcfs_closed_at.get(target)
        if closed_at is None or now - closed_at >= FCFS_REOPEN_S:
            return bounded
        reason = f"fcfs: closed {now - closed_at:.0f} s ago, reopens {FCFS_REOPEN_S:g} s after"
        return LaneWidth(0, bounded.policy, reason)

    def _views_now(self) -> Mapping[str, TargetView]:
        """The targets' views, built again once they are :data:`VIEWS_TTL_S` old."""
        now = self._clock.monotonic()
        if self._built is None or now - self._built[0] >= self._views_ttl_s:
            self._built = (now, self._views())
        return self._built[1]

    def _scheduling_now(self, target: str) -> Scheduling:
        known = self._scheduling.get(target)
        if known is None:
            return Scheduling(FCFS, "not read yet: taken as fcfs")
        return known[1]

    def _set(self, lane: Lane, decided: LaneWidth) -> None:
        before = lane.width
        lane.set(decided.width, decided.reason, decided.policy, decided.spacing_s)
        self._width.labels(target=lane.target).set(decided.width)
        if decided.width != before:
            log.info(
                "batch lane moved",
                extra={
                    "target": lane.target,
                    "before": before,
                    "after": decided.width,
                    "reason": decided.reason,
                },
            )


def _firing(
    specs: Sequence[PolicySpec], states: Mapping[tuple[str, str], PolicyState], target: str
) -> bool:
    """Whether a batch policy fires on ``target`` (its view is then needed)."""
    return any(
        (state := states.get((spec.name, target))) is not None and state.phase is Phase.FIRING
        for spec in batch_policies(specs, target)
    )


class _OpenEntries(Protocol):
    def open_entry(self, target: str) -> JournalEntry | None: ...


def journal_in_flight(journal: _OpenEntries) -> InFlight:
    """What change is in flight on a target, read from the actuation journal's open entry."""

    def in_flight(target: str) -> str | None:
        entry = journal.open_entry(target)
        if entry is None:
            return None
        return f"change {entry.id} of {target} by {entry.policy} is in flight ({entry.step})"

    return in_flight
