"""The backtest's actuator: the daemon's preflight decides, and nothing is touched.

Plugged into the governor's actuation plane in place of the vLLM actuator, it receives what
the daemon's would receive (automatic changes from the router, approved ones from the
approvals), and refuses what the vLLM actuator's preflight would refuse, with the same checks
(:mod:`actuators.vllm.preflight`, :mod:`actuators.vllm.pace`): one change in flight per server
and the journal's account of the last hour (dwell, hourly budgets, the restart envelope), a
freeze, the envelope, a current value that is unknown or stale, no change at all, and the
instance's ``mode = "dry-run"``. What passes is journaled as applied, so the governor enters it
in the knobs' histories exactly as after a real restart.

What it cannot know, it does not pretend to: a would-have change takes no time and always
verifies (its restart, verification and revert are consequences, and a backtest shows
decisions, not their consequences), and the server's knob values stay as recorded. The checks
that need the server (its version's flag registry, vLLM's own parser, that it serves now) are
skipped. Freezes are read from the configured state directory as they are now, at each tick's
recorded time: a freeze file with an expiry blocks the ticks before it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from actuators.vllm.pace import recent_changes
from actuators.vllm.preflight import Refusal, knob_refusals, restart_refusals
from daemon.core.actuation import (
    DONE,
    DRY_RUN,
    REFUSED,
    ActuationJournal,
    ActuationResult,
    ChangeRequest,
)
from daemon.core.clock import Clock
from daemon.core.errors import ChangeInFlight
from daemon.core.freezes import freeze_reason
from daemon.core.settings import VllmInstance

WOULD_HAVE = "would have applied (backtest: nothing was touched)"


class WouldHaveActuator:
    """Decides as the vLLM actuator's preflight does; journals, and changes nothing.

    Args:
        journal: The governor's actuation journal.
        clock: The governor's clock.
        freeze_dir: Where freeze files are read (the configured state directory).
        knobs: Target -> its knob values now (as recorded).
    """

    def __init__(
        self,
        journal: ActuationJournal,
        clock: Clock,
        freeze_dir: Path,
        knobs: Callable[[str], Mapping[str, float]],
    ) -> None:
        self._journal = journal
        self._clock = clock
        self._freeze_dir = freeze_dir
        self._knobs = knobs

    def current_knobs(self, instance: VllmInstance) -> Mapping[str, float]:
        """The recorded knob values of ``instance`` at this tick."""
        return self._knobs(instance.name)

    async def apply(
        self, instance: VllmInstance, request: ChangeRequest, *, dry_run: bool = False
    ) -> ActuationResult:
        """Refuse it as preflight would, or journal it as applied (or as a dry run)."""
        now = self._clock.wall()
        current = self.current_knobs(instance)
        moves = {knob: (current.get(knob), new) for knob, new in request.changes.items()}
        plan: dict[str, Any] = {
            "knobs": {knob: list(move) for knob, move in moves.items()},
            "operation": request.operation,
            "reason": request.reason,
        }
        try:
            recent = recent_changes(self._journal, instance.name, now)
        except ChangeInFlight as exc:
            return self._refused(request, plan, [("in_flight", str(exc))])
        refusals: list[Refusal] = []
        if frozen := freeze_reason(self._freeze_dir, instance.name, now):
            refusals.append(("frozen", frozen))
        refusals.extend(
            knob_refusals(instance, request, moves, changed_at=recent.changed_at, now=now)
        )
        if request.operation == "restart":
            refusals.extend(restart_refusals(instance, recent.restarted_at, now))
        elif all(old == new for old, new in moves.values()):
            refusals.append(("no_change", "the knobs already have these values"))
        if refusals:
            return self._refused(request, plan, refusals)
        if dry_run or instance.mode == "dry-run":
            outcome = "dry run: would have written the change and restarted"
            self._journal.record(
                instance.name, request.policy, state=DRY_RUN, outcome=outcome, plan=plan, timings={}
            )
            return ActuationResult(
                request.target, request.policy, DRY_RUN, outcome, dict(request.changes), plan=plan
            )
        entry = self._journal.begin(instance.name, request.policy, plan, {})
        self._journal.finish(entry.id, DONE, WOULD_HAVE, {})
        changes = dict(request.changes)
        return ActuationResult(
            request.target, request.policy, DONE, WOULD_HAVE, changes, entry.id, plan=plan
        )

    async def refresh(self, instance: VllmInstance) -> None:
        """Nothing to look at: the knob values are the recorded ones."""
        del instance

    async def reconcile(self, instance: VllmInstance) -> ActuationResult | None:
        """Nothing is ever left open: a would-have change ends where it begins."""
        del instance
        return None

    def _refused(
        self, request: ChangeRequest, plan: dict[str, Any], refusals: list[Refusal]
    ) -> ActuationResult:
        guard = refusals[0][0]
        outcome = f"refused ({guard}): " + "; ".join(why for _, why in refusals)
        body = {**plan, "refusals": [list(refusal) for refusal in refusals]}
        self._journal.record(
            request.target, request.policy, state=REFUSED, outcome=outcome, plan=body, timings={}
        )
        changes = dict(request.changes)
        return ActuationResult(
            request.target,
            request.policy,
            REFUSED,
            outcome,
            changes,
            plan=body,
            refusals=tuple(refusals),
        )
