"""A rollout's member side: this governor does what a rollout asks of its own servers.

At each look (every ``poll_s``) it reads every live rollout. For each of this governor's
instances that the rollout asks to APPLY or REVERT, and that has not answered that step yet,
it acts through its :class:`MemberActions` port (the governor's normal actuation path: every
preflight check and a restart slot of the group's budget) and writes a
:class:`~daemon.fleet.rollout_state.MemberReport`; an APPLY report carries the values the
server ran before, which is what a REVERT restores. While the canary is being judged and its
window has passed, each of its servers that the analysis compares (the canary, the members
not yet changed) publishes its counts over the window.

It acts at most once on one step (:mod:`daemon.fleet.member_resume`): before acting it writes
the step it begins to etcd, and whenever it is asked it first compares that record, the
server's files and the journal with what the step asks. A governor restarted after its
server took the change (or after the change was reverted), but before it reported, reports
what the journal says, with no second restart; while a change of the server is open (the
reconcile finishing the dead governor's), it waits.

Members never write the rollout itself: only its driver does (``rollout_driver``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol

from daemon.core.clock import Clock
from daemon.fleet.canary_analysis import ServerCounts
from daemon.fleet.errors import FleetError
from daemon.fleet.member_resume import Answer, Attempt, Standing, resume
from daemon.fleet.rollout_state import MemberReport, Rollout, Step, unchanged_members
from daemon.fleet.rollout_steps import analysis_due
from daemon.fleet.rollout_store import RolloutStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MemberOutcome:
    """What one change of one server came to.

    Attributes:
        ok: Done and verified healthy.
        detail: The outcome in words (the journal's).
        previous: The knob values before the change.
    """

    ok: bool
    detail: str
    previous: Mapping[str, float]


class MemberActions(Protocol):
    """What a rollout's member side needs of the governor."""

    async def change(
        self, instance: str, policy: str, values: Mapping[str, float], reason: str
    ) -> MemberOutcome:
        """Set ``values`` on ``instance`` for ``policy`` through the normal actuation path."""
        ...

    async def counts(
        self, instance: str, since: datetime, until: datetime, ttft_slo_s: float
    ) -> ServerCounts | None:
        """The server's counts over ``[since, until]`` (within: TTFT at most ``ttft_slo_s``).

        None when unknown (no scrapes over the window).
        """
        ...

    def standing(self, instance: str, policy: str, since: datetime | None) -> Standing:
        """What is known of ``instance`` before a rollout's step is acted on.

        Its files' knob values, whether a change of it is open in the journal, and the last
        change of it for ``policy`` that finished since ``since`` (not looked for when None).
        """
        ...


class RolloutMember:
    """This governor's servers as members of the fleet's rollouts.

    Args:
        store: The rollouts in etcd.
        host: This governor's name in the fleet.
        instances: This governor's instances (read at each look: reloads are seen).
        actions: How it changes a server and counts its requests.
        clock: The injected clock (wall time: windows span hosts).
        poll_s: How often it looks.
    """

    def __init__(
        self,
        store: RolloutStore,
        *,
        host: str,
        instances: Callable[[], Iterable[str]],
        actions: MemberActions,
        clock: Clock,
        poll_s: float,
    ) -> None:
        self._store = store
        self._host = host
        self._instances = instances
        self._actions = actions
        self._clock = clock
        self._poll_s = poll_s

    async def run(self, started: Callable[[], None]) -> None:
        """Look at every ``poll_s`` until cancelled (a failed look is retried at the next)."""
        started()
        while True:
            try:
                await self.look()
            except FleetError as exc:
                log.warning("rollouts not read", extra={"error": str(exc)})
            await asyncio.sleep(self._poll_s)

    async def look(self) -> None:
        """One look: act on what each live rollout asks of this governor's servers."""
        own = {f"{self._host}/{name}": name for name in self._instances()}
        for stored in await self._store.read_all():
            rollout = stored.rollout
            mine = [member for member in rollout.members if member in own]
            if rollout.phase.finished or not mine:
                continue
            duties = {m: duty for m in mine if (duty := rollout.duty(m)) is not None}
            # The reports only when something is asked of this governor (most looks at a
            # live rollout ask nothing of it: one range fewer per period while it waits).
            reports = (
                {r.member: r for r in await self._store.reports(rollout.group, rollout.policy)}
                if duties
                else {}
            )
            for member, duty in duties.items():
                answered = reports.get(member)
                if answered is not None and answered.asked is duty:
                    continue
                report = await self._answer(rollout, member, own[member], duty, answered)
                if report is not None:
                    await self._store.report(rollout.group, rollout.policy, report)
            await self._publish_counts(rollout, mine, own)

    async def _answer(
        self,
        rollout: Rollout,
        member: str,
        instance: str,
        duty: Step,
        answered: MemberReport | None,
    ) -> MemberReport | None:
        """The report on ``duty``: acted on, or found already done; None: look again later."""
        if duty is Step.APPLY:
            values = rollout.changes
        else:
            values = answered.previous if answered is not None else {}
            if not values:
                return MemberReport(
                    member, duty, False, "no record of the values before the change"
                )
        attempt = await self._store.attempt(rollout.group, rollout.policy, member)
        began = attempt if attempt is not None and attempt.asked is duty else None
        standing = self._actions.standing(
            instance, rollout.policy, began.at if began is not None else None
        )
        found = resume(duty, values, began, standing)
        if found.answer is Answer.WAIT:
            log.info("rollout step waits", extra={"member": member, "why": found.detail})
            return None
        if found.answer is not Answer.ACT:
            log.warning(
                "rollout step found already answered: nothing restarted",
                extra={"member": member, "step": duty.value, "detail": found.detail},
            )
            previous = values if duty is Step.REVERT else found.previous
            return MemberReport(member, duty, found.answer is Answer.DONE, found.detail, previous)
        before = {knob: standing.knobs[knob] for knob in values if knob in standing.knobs}
        began = Attempt(member, duty, dict(values), before, self._clock.wall())
        await self._store.begin(rollout.group, rollout.policy, began)
        reason = f"{rollout.policy}: rollout over group {rollout.group}"
        if duty is Step.APPLY:
            role = "canary" if member == rollout.canary else "member"
            outcome = await self._actions.change(
                instance, rollout.policy, values, f"{reason} ({role})"
            )
            return MemberReport(member, duty, outcome.ok, outcome.detail, outcome.previous)
        outcome = await self._actions.change(
            instance, rollout.policy, values, f"{reason} (canary reverted)"
        )
        return replace(MemberReport(member, duty, outcome.ok, outcome.detail), previous=values)

    async def _publish_counts(
        self, rollout: Rollout, mine: list[str], own: Mapping[str, str]
    ) -> None:
        now = self._clock.wall()
        if not analysis_due(rollout, now):
            return
        compared = {rollout.canary, *unchanged_members(rollout)}
        published = await self._store.figures(rollout.group, rollout.policy)
        since = datetime.fromisoformat(rollout.analysis_since)
        until = since + timedelta(seconds=rollout.rule.window_s)
        for member in mine:
            if member not in compared or member in published:
                continue
            slo = rollout.rule.ttft_slo_s
            counts = await self._actions.counts(own[member], since, until, slo)
            if counts is None:
                log.info("no counts over the canary window yet", extra={"member": member})
                continue
            counts = replace(counts, member=member)
            await self._store.publish_figures(rollout.group, rollout.policy, counts)
            log.info("counts published", extra={"member": member, "counts": counts.to_dict()})
