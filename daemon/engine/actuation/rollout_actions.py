"""What a rollout asks of this governor's servers, done the governor's way.

A rollout's member side (:mod:`daemon.fleet.rollout_member`) changes a server through
:meth:`ActuationPlane.apply_approved`: the same queue and every check of an approved change
(mode, envelope, budget, dwell, freezes, the group's restart slot, the journal, the
verification and its revert). Before that, the member side reads what the files and the
journal say of the server (:meth:`EngineRolloutActions.standing`), so that a step taken
before a restart of the governor is never taken twice. Its counts over the canary's window
come from the signal store, the governor's own scrapes of that server: requests served a
first token (the TTFT histogram's count), those within the SLO (its bucket at the SLO, or the
largest below it), and aborted requests; a counter that went down (a restart) counts from
its new value.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from datetime import datetime

from daemon.core.actuation import DONE, ChangeRequest
from daemon.core.clock import Clock
from daemon.core.settings import GovernorConfig
from daemon.engine.actuation.actuation_plane import ActuationPlane
from daemon.fleet.canary_analysis import ServerCounts
from daemon.fleet.member_resume import FinishedChange, Standing
from daemon.fleet.rollout_member import MemberOutcome
from daemon.sources.store import SignalStore


class EngineRolloutActions:
    """The member side's port on this governor: its actuation plane and its signal store.

    Args:
        config: The configuration in force.
        actuation: The actuation plane.
        store: The signal store.
        clock: The injected clock (the store's points are on its monotonic side).
    """

    def __init__(
        self,
        config: Callable[[], GovernorConfig],
        actuation: ActuationPlane,
        store: SignalStore,
        clock: Clock,
    ) -> None:
        self._config = config
        self._actuation = actuation
        self._store = store
        self._clock = clock

    async def change(
        self, instance: str, policy: str, values: Mapping[str, float], reason: str
    ) -> MemberOutcome:
        """Apply ``values`` to ``instance`` as an approved change; what came of it."""
        target = next((i for i in self._config().vllm if i.name == instance), None)
        now = dict(self._actuation.knobs().get(instance, {}))
        previous = {knob: now[knob] for knob in values if knob in now}
        if target is None or len(previous) != len(values):
            return MemberOutcome(False, f"{instance}: no such server, or its knobs unknown", {})
        request = ChangeRequest(
            instance, policy, dict(values), previous, reason=reason, risk="approval"
        )
        result = await self._actuation.apply_approved(target, request)
        return MemberOutcome(result.state == DONE, f"{result.state}: {result.outcome}", previous)

    def standing(self, instance: str, policy: str, since: datetime | None) -> Standing:
        """What the files and the journal say of ``instance`` before a rollout's step.

        The files as the actuator reads them; a change open in the journal (under way, or
        left by a governor that died and being reconciled); the last change for ``policy``
        that finished since ``since``.
        """
        journal = self._actuation.journal
        last = None if since is None else journal.last_finished(instance, policy, since)
        return Standing(
            knobs=dict(self._actuation.knobs().get(instance, {})),
            open_change=journal.open_entry(instance) is not None,
            finished=None if last is None else FinishedChange(last.state, last.outcome),
        )

    async def counts(
        self, instance: str, since: datetime, until: datetime, ttft_slo_s: float
    ) -> ServerCounts | None:
        """The server's counts over ``[since, until]`` from the store; None without scrapes."""
        offset = self._clock.wall().timestamp() - self._clock.monotonic()
        start, end = since.timestamp() - offset, until.timestamp() - offset
        served = self._increase("vllm_ttft_seconds_count", instance, start, end)
        if served is None:
            return None
        within = self._within(instance, ttft_slo_s, start, end)
        errors = self._increase(
            "vllm_request_success_total", instance, start, end, finished_reason="abort"
        )
        return ServerCounts(instance, served, within or 0.0, errors or 0.0, end - start)

    def _within(self, instance: str, slo_s: float, start: float, end: float) -> float | None:
        bounds = sorted(
            {
                float(le)
                for key in self._store.keys("vllm_ttft_seconds_bucket", instance=instance)
                if (le := key.label("le")) is not None and le != "+Inf" and float(le) <= slo_s
            }
        )
        if not bounds:
            return None
        best = bounds[-1]
        total = 0.0
        for key in self._store.keys("vllm_ttft_seconds_bucket", instance=instance):
            le = key.label("le")
            if le is not None and le != "+Inf" and float(le) == best:
                total += _increase(self._store.points(key, start), end)
        return total

    def _increase(
        self, name: str, instance: str, start: float, end: float, **labels: str
    ) -> float | None:
        keys = self._store.keys(name, instance=instance, **labels)
        if not keys:
            return None
        return sum(_increase(self._store.points(key, start), end) for key in keys)


def _increase(points: list[tuple[float, float]], end: float) -> float:
    """A counter's increase over points up to ``end`` (a drop is a reset: count from it)."""
    inside = [value for at, value in points if at <= end]
    total = 0.0
    for before, after in itertools.pairwise(inside):
        total += after - before if after >= before else after
    return total
