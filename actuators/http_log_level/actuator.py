"""The live log-level actuator: one change of one service at a time, journaled to the end.

``read the level in force → preflight → journal (old and new level) → set → read back →
done``, or, when the service refuses, does not answer or reads back something else: set the
old level again, read it back, and finish ``reverted`` with the policy quarantined (``failed``
when even the old level does not come back). Nothing restarts, so a change takes a second.

One change per target: an asyncio lock within this process, and the journal's one open entry
per target across processes; a governor that died mid-change finishes it on its next start
from what the service reads back (:meth:`HttpLogLevelActuator.reconcile`). Refusals and dry
runs are journaled too.

The level policies see is the last one read (:meth:`HttpLogLevelActuator.refresh`, which the
engine calls every ``poll_interval_s`` and after each change) while that reading is younger
than ``stale_after_s``: an old or failed reading is no value at all, never a guess.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from actuators.http_log_level.http_calls import get, send
from actuators.http_log_level.plan import LevelPlan
from actuators.http_log_level.preflight import preflight
from actuators.http_log_level.wire import level_in, level_request
from daemon.api import (
    ABANDONED,
    DONE,
    DRY_RUN,
    FAILED,
    LOG_LEVEL_KNOB,
    NO_FREEZE_SOURCE,
    REFUSED,
    REVERTED,
    ActuationError,
    ActuationJournal,
    ActuationRefused,
    ActuationResult,
    ChangeInFlight,
    ChangeRequest,
    Clock,
    FreezeSource,
    HttpLogLevelTarget,
    JournalState,
    freeze_reason,
)

log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)
SET, VERIFYING, REVERTING, RECONCILING = "set", "verifying", "reverting", "reconciling"


class HttpLogLevelActuator:
    """Sets log levels of services through their HTTP admin endpoints.

    Args:
        journal: The engine's journal (shared with the vLLM actuator).
        clock: The injected clock.
        freeze_dir: Where freeze files are looked for (the governor's state directory).
        fleet_freeze: A freeze besides the files (the fleet's): a level is set live, with no
            restart, so only a freeze in force holds it, never a fleet that cannot be seen.
    """

    def __init__(
        self,
        journal: ActuationJournal,
        clock: Clock,
        freeze_dir: Path,
        *,
        fleet_freeze: FreezeSource = NO_FREEZE_SOURCE,
    ) -> None:
        self._journal = journal
        self._clock = clock
        self._freeze_dir = freeze_dir
        self._fleet_freeze = fleet_freeze
        self._locks: dict[str, asyncio.Lock] = {}
        self._levels: dict[str, tuple[float, float]] = {}  # name -> (level, read at)

    def current_knobs(self, target: HttpLogLevelTarget) -> Mapping[str, float]:
        """The level last read, while that reading is fresh; empty otherwise."""
        reading = self._levels.get(target.name)
        if reading is None or self._clock.monotonic() - reading[1] > target.stale_after_s:
            return {}
        return {LOG_LEVEL_KNOB: reading[0]}

    async def refresh(self, target: HttpLogLevelTarget) -> None:
        """Read the level in force again (a failed reading forgets the last one)."""
        level = await self.read(target)
        if level is None:
            self._levels.pop(target.name, None)
        else:
            self._levels[target.name] = (level, self._clock.monotonic())

    async def read(self, target: HttpLogLevelTarget) -> float | None:
        """The level in force; None when the service does not say one clearly."""
        try:
            status, text = await get(target.reading_url(), target.timeout_s)
        except ActuationError as exc:
            log.debug("log level not readable", extra={"target": target.name, "error": str(exc)})
            return None
        return level_in(target, text) if 200 <= status < 300 else None

    async def apply(
        self, target: HttpLogLevelTarget, request: ChangeRequest, *, dry_run: bool = False
    ) -> ActuationResult:
        """Make the change, or say why not; journal it either way."""
        async with self._locks.setdefault(target.name, asyncio.Lock()):
            return await self._apply(target, request, dry_run or target.mode == "dry-run")

    async def reconcile(self, target: HttpLogLevelTarget) -> ActuationResult | None:
        """Finish what a previous governor left open for ``target``, from what it reads back."""
        async with self._locks.setdefault(target.name, asyncio.Lock()):
            entry = self._journal.open_entry(target.name)
            if entry is None:
                return None
            started = self._clock.monotonic()
            plan = LevelPlan.from_json(entry.plan)
            in_force = await self.read(target)
            self._journal.step(entry.id, RECONCILING, {"found_step": entry.step, "read": in_force})
            change = _Change(target, entry.id, plan, started)
            if in_force == plan.new:
                return self._finish(change, DONE, "set before the governor stopped; read back")
            if in_force == plan.old:
                why = "the governor stopped before the level changed"
                return self._finish(change, ABANDONED, f"abandoned, nothing changed: {why}")
            return await self._revert(change, f"found at {_shown(in_force)} after a crash")

    async def _apply(
        self, target: HttpLogLevelTarget, request: ChangeRequest, dry_run: bool
    ) -> ActuationResult:
        started = self._clock.monotonic()
        try:
            in_force = await self._preflight(target, request)
        except (ActuationRefused, ChangeInFlight) as exc:
            guard = exc.guard if isinstance(exc, ActuationRefused) else "in_flight"
            outcome = f"refused ({guard}): {exc}"
            return self._record(target, request, REFUSED, outcome, {"request": asdict(request)})
        plan = LevelPlan.make(target, request, in_force, request.changes[LOG_LEVEL_KNOB])
        if dry_run:
            outcome = f"dry run: would {plan.method} {plan.url}"
            return self._record(target, request, DRY_RUN, outcome, plan.as_json())
        try:
            entry = self._journal.begin(target.name, request.policy, plan.as_json(), {})
        except ChangeInFlight as exc:
            refused = f"refused (in_flight): {exc}"
            return self._record(target, request, REFUSED, refused, plan.as_json())
        change = _Change(target, entry.id, plan, started)
        return await self._forward(change)

    async def _preflight(self, target: HttpLogLevelTarget, request: ChangeRequest) -> float:
        """The level in force, once every check passed.

        Raises:
            ActuationRefused: with every refusal found.
            ChangeInFlight: another change of this target is open in the journal.
        """
        in_force = await self.read(target)
        if self._journal.open_entry(target.name) is not None:
            message = f"another change of {target.name} is in flight"
            raise ChangeInFlight(message)
        now = self._clock.wall()
        refusals = preflight(
            target,
            request,
            in_force=in_force,
            frozen=freeze_reason(self._freeze_dir, target.name, now)
            or self._fleet_freeze.freeze_reason(target.name, now, restart=False),
            changed_at=self._changed_at(target),
            now=now,
        )
        if refusals:
            raise ActuationRefused("; ".join(why for _, why in refusals), refusals[0][0])
        assert in_force is not None  # preflight refuses an unknown level
        return in_force

    async def _forward(self, change: _Change) -> ActuationResult:
        failure = await self._set(change, change.plan.new, SET)
        if failure:
            return await self._revert(change, failure)
        self._journal.step(change.entry_id, VERIFYING)
        read = await self.read(change.target)
        self._journal.step(change.entry_id, VERIFYING, {"read_back": read})
        if read != change.plan.new:
            why = f"read back {_shown(read)}, not {change.plan.new:g}"
            return await self._revert(change, why)
        return self._finish(change, DONE, f"applied and read back: log_level {_moved(change)}")

    async def _revert(self, change: _Change, reason: str) -> ActuationResult:
        log.error(
            "log level change failed; setting the old level back",
            extra={"target": change.target.name, "reason": reason},
        )
        self._journal.step(change.entry_id, REVERTING, {"revert_reason": reason})
        old = change.plan.old
        failure = await self._set(change, old, REVERTING)
        read = None if failure else await self.read(change.target)
        if read != old:
            why = failure or f"read back {_shown(read)}"
            outcome = f"{reason}; the old level {old:g} did not come back: {why}"
            return self._finish(change, FAILED, outcome, quarantine=True)
        outcome = f"reverted to log_level {old:g}: {reason}"
        return self._finish(change, REVERTED, outcome, quarantine=True)

    async def _set(self, change: _Change, level: float, step: str) -> str:
        """Send one level; "" when the service took it, else why not."""
        request = level_request(change.target, level)
        try:
            status, text = await send(request, change.target.timeout_s)
        except ActuationError as exc:
            self._journal.step(change.entry_id, step, {"sent": request.word, "error": str(exc)})
            return str(exc)
        self._journal.step(change.entry_id, step, {"sent": request.word, "status": status})
        if not 200 <= status < 300:
            return f"HTTP {status} from {request.method} {request.url}: {text.strip()[:200]}"
        return ""

    def _changed_at(self, target: HttpLogLevelTarget) -> list[Any]:
        since = self._clock.wall() - HOUR
        return [
            e.finished_at or e.started_at for e in self._journal.applied_since(target.name, since)
        ]

    def _finish(
        self, change: _Change, state: JournalState, outcome: str, *, quarantine: bool = False
    ) -> ActuationResult:
        timings = {"total": round(self._clock.monotonic() - change.started, 4)}
        self._journal.finish(change.entry_id, state, outcome, timings)
        log.log(
            logging.INFO if state in (DONE, ABANDONED) else logging.ERROR,
            "log level change finished",
            extra={"target": change.target.name, "state": state, "outcome": outcome},
        )
        return ActuationResult(
            target=change.target.name,
            policy=change.plan.policy,
            state=state,
            outcome=outcome,
            changes={LOG_LEVEL_KNOB: change.plan.new},
            entry_id=change.entry_id,
            timings=timings,
            plan=change.plan.as_json(),
            quarantine=quarantine,
        )

    def _record(
        self,
        target: HttpLogLevelTarget,
        request: ChangeRequest,
        state: JournalState,
        outcome: str,
        plan: dict[str, Any],
    ) -> ActuationResult:
        entry = self._journal.record(
            target.name, request.policy, state=state, outcome=outcome, plan=plan, timings={}
        )
        return ActuationResult(
            target=target.name,
            policy=request.policy,
            state=state,
            outcome=outcome,
            changes=dict(request.changes),
            entry_id=entry.id,
            plan=plan,
        )


@dataclass(frozen=True, slots=True)
class _Change:
    """One journaled change in flight: the target, its entry, its plan, when it began."""

    target: HttpLogLevelTarget
    entry_id: int
    plan: LevelPlan
    started: float


def _moved(change: _Change) -> str:
    return f"{change.plan.old:g} -> {change.plan.new:g}"


def _shown(value: float | None) -> str:
    return "nothing usable" if value is None else f"{value:g}"
