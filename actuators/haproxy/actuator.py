"""The HAProxy actuator: one instance's admission cap, set live through HAProxy's runtime API.

``preflight -> read -> set -> read back -> done``, or ``set back -> read back`` when the value
read back is not the one asked for. Live and low risk: ``set maxconn server BACKEND/SERVER N``
takes effect at once, with no reload and no dropped connection (requests inside vLLM finish;
a raise admits queued ones, a cut admits no new one until enough have finished).

Preflight, before anything is sent: the cap is at least 1 and at most the instance's
``max-num-seqs`` now (above it vLLM would queue the excess itself, with no bound on the wait);
the instance is not frozen (a freeze holds the cap where it is, whatever the loop wants); the
instance is not in ``dry-run`` mode. One change per gate at a time (an asyncio lock).

The journal gets a row per change (applied, reverted, failed), not per attempt: a refusal or
a cap already in force is only returned, and the engine counts it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from daemon.api import (
    CAP_APPLIED,
    CAP_FAILED,
    CAP_REFUSED,
    CAP_REVERTED,
    CAP_UNCHANGED,
    NO_FREEZE_SOURCE,
    CapChange,
    CapJournal,
    CapResult,
    CapState,
    Clock,
    FreezeSource,
    GateRuntime,
    GovernorError,
    VllmInstance,
    freeze_reason,
)


class HaproxyActuator:
    """Moves the admission cap of the gates in front of vLLM instances.

    Args:
        journal: Where each change is kept.
        clock: The injected clock (freeze expiries are wall-clock times).
        freeze_dir: Where freeze files are looked for (the governor's state directory).
        fleet_freeze: The fleet's freeze: a cap is live, so only a freeze in force holds it,
            never a fleet that cannot be seen.
    """

    def __init__(
        self,
        journal: CapJournal,
        clock: Clock,
        freeze_dir: Path,
        fleet_freeze: FreezeSource = NO_FREEZE_SOURCE,
    ) -> None:
        self._journal = journal
        self._clock = clock
        self._freeze_dir = freeze_dir
        self._fleet_freeze = fleet_freeze
        self._locks: dict[str, asyncio.Lock] = {}

    async def set_cap(
        self, instance: VllmInstance, gate: GateRuntime, change: CapChange
    ) -> CapResult:
        """Check, set, verify and (when the gate did not take it) revert one cap change."""
        refusal = self.preflight(instance, change)
        if refusal:
            return CapResult(change.target, change.policy, CAP_REFUSED, None, None, refusal)
        lock = self._locks.setdefault(change.target, asyncio.Lock())
        async with lock:
            result = await self._change(gate, change)
        if result.state not in (CAP_UNCHANGED, CAP_REFUSED):
            self._journal.record(result, change.reason)
        return result

    def preflight(self, instance: VllmInstance, change: CapChange) -> str:
        """Why ``change`` may not be made now; "" when it may."""
        if change.target != instance.name:
            return f"change for {change.target} handed to instance {instance.name}"
        if change.cap < 1:
            return f"cap {change.cap} is below 1 (0 would mean no limit at all)"
        if change.cap > change.max_cap:
            return f"cap {change.cap} is above max-num-seqs {change.max_cap}"
        now = self._clock.wall()
        frozen = freeze_reason(self._freeze_dir, instance.name, now) or (
            self._fleet_freeze.freeze_reason(instance.name, now, restart=False)
        )
        if frozen:
            return f"{frozen}: the cap holds"
        if instance.mode == "dry-run":
            return f"dry-run: would set the cap to {change.cap}"
        return ""

    async def _change(self, gate: GateRuntime, change: CapChange) -> CapResult:
        def result(
            state: CapState, before: int | None, after: int | None, outcome: str
        ) -> CapResult:
            return CapResult(change.target, change.policy, state, before, after, outcome)

        try:
            before = await gate.read_cap()
        except GovernorError as exc:
            return result(CAP_REFUSED, None, None, f"cannot read the cap at {gate.where}: {exc}")
        if before == change.cap:
            return result(CAP_UNCHANGED, before, before, f"the cap is {before} already")
        try:
            after = await gate.write_cap(change.cap)
        except GovernorError as exc:
            return await self._revert(gate, change, before, f"setting it failed: {exc}")
        if after != change.cap:
            return await self._revert(gate, change, before, f"read back {after}")
        return result(CAP_APPLIED, before, after, f"cap {_shown(before)} -> {after}")

    async def _revert(
        self, gate: GateRuntime, change: CapChange, before: int | None, why: str
    ) -> CapResult:
        """Put the cap back as it was; ``failed`` when that cannot be confirmed."""
        asked = f"asked {change.cap} at {gate.where}, {why}"
        if before is None:
            # No limit cannot be set back (0 is refused); the gate is as HAProxy left it.
            after = await _read_or_none(gate)
            outcome = f"{asked}; no cap to go back to, the gate holds {_shown(after)}"
            return CapResult(change.target, change.policy, CAP_FAILED, before, after, outcome)
        try:
            after = await gate.write_cap(before)
        except GovernorError as exc:
            outcome = f"{asked}; setting {before} back failed too: {exc}"
            after = await _read_or_none(gate)
            return CapResult(change.target, change.policy, CAP_FAILED, before, after, outcome)
        state = CAP_REVERTED if after == before else CAP_FAILED
        outcome = f"{asked}; set back to {before}, read back {_shown(after)}"
        return CapResult(change.target, change.policy, state, before, after, outcome)


async def _read_or_none(gate: GateRuntime) -> int | None:
    try:
        return await gate.read_cap()
    except GovernorError:
        return None


def _shown(cap: int | None) -> str:
    return "none" if cap is None else str(cap)
