"""The HAProxy actuator: one instance's admission cap, set live through HAProxy's runtime API.

It speaks the one actuator protocol (:class:`daemon.api.Actuator`) with one knob,
``gate_cap``: ``preflight -> read -> set -> read back -> done``, or ``set back -> read back``
when the value read back is not the one asked for. Live and low risk: ``set maxconn server
BACKEND/SERVER N`` takes effect at once, with no reload and no dropped connection (requests
inside vLLM finish; a raise admits queued ones, a cut admits no new one until enough have
finished). The engine's admission loop calls :meth:`HaproxyActuator.apply`; policies' intents
never reach it (its kind is not routed).

Preflight (:mod:`actuators.haproxy.preflight`), before anything is sent: the cap inside its
envelope, ``[1, max-num-seqs]``; no freeze; no other change of the instance in flight (the
engine's journal has none open, a restart say); the instance not in ``dry-run`` mode. One
change per gate at a time within the process (an asyncio lock).

The gate's journal gets a row per change (applied, reverted, failed), not per attempt: a
refusal or a cap already in force is only returned, and the engine counts it. Nothing is left
open across a crash: the cap is live, and the next look of the loop steers it from what it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from actuators.haproxy.preflight import preflight
from daemon.api import (
    CAP_APPLIED,
    CAP_FAILED,
    CAP_REFUSED,
    CAP_REVERTED,
    CAP_UNCHANGED,
    GATE_CAP_KNOB,
    NO_CHANGE,
    NO_FREEZE_SOURCE,
    ActuationJournal,
    ActuationResult,
    CapJournal,
    CapResult,
    CapState,
    ChangeRequest,
    Clock,
    FreezeSource,
    GateCapLookup,
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
        *,
        gates: GateCapLookup,
        changes: ActuationJournal,
        fleet_freeze: FreezeSource = NO_FREEZE_SOURCE,
    ) -> None:
        self._journal = journal
        self._clock = clock
        self._freeze_dir = freeze_dir
        self._gates = gates
        self._changes = changes
        self._fleet_freeze = fleet_freeze
        self._locks: dict[str, asyncio.Lock] = {}

    def current_knobs(self, target: VllmInstance) -> Mapping[str, float]:
        """Nothing without waiting: the loop reads ``gate_cap`` from the HAProxy source."""
        del target
        return {}

    async def refresh(self, target: VllmInstance) -> None:
        """Nothing to read ahead: every change reads the cap in force first."""
        del target

    async def reconcile(self, target: VllmInstance) -> ActuationResult | None:
        """Nothing is ever left open: a cap is set and read back in one go."""
        del target
        return None

    async def apply(
        self, target: VllmInstance, request: ChangeRequest, *, dry_run: bool = False
    ) -> ActuationResult:
        """Check, set, verify and (when the gate did not take it) revert one cap change."""
        cap = int(request.changes.get(GATE_CAP_KNOB, 0))
        refusals = self._refusals(target, request)
        if refusals:
            outcome = "; ".join(why for _, why in refusals)
            refused = CapResult(target.name, request.policy, CAP_REFUSED, None, None, outcome)
            return refused.actuation(cap=cap, refusals=tuple(refusals))
        if dry_run or target.mode == "dry-run":
            outcome = f"dry-run: would set the cap to {cap}"
            dry = CapResult(target.name, request.policy, CAP_REFUSED, None, None, outcome)
            return dry.actuation(cap=cap, dry_run=True)
        gate = self._gates(target)
        if gate is None:
            outcome = f"{target.name} has no gate in config.toml"
            missing = CapResult(target.name, request.policy, CAP_REFUSED, None, None, outcome)
            return missing.actuation(cap=cap, refusals=(("not_actuated", outcome),))
        async with self._locks.setdefault(target.name, asyncio.Lock()):
            result = await self._change(gate, target.name, request.policy, cap)
        if result.state not in (CAP_UNCHANGED, CAP_REFUSED):
            self._journal.record(result, request.reason)
        unchanged = ((NO_CHANGE, result.outcome),) if result.state == CAP_UNCHANGED else ()
        return result.actuation(cap=cap, refusals=unchanged)

    def preflight(self, instance: VllmInstance, request: ChangeRequest) -> str:
        """Why ``request`` may not be made now; "" when it may."""
        return "; ".join(why for _, why in self._refusals(instance, request))

    def _refusals(self, instance: VllmInstance, request: ChangeRequest) -> list[tuple[str, str]]:
        now = self._clock.wall()
        frozen = freeze_reason(self._freeze_dir, instance.name, now) or (
            self._fleet_freeze.freeze_reason(instance.name, now, restart=False)
        )
        open_entry = self._changes.open_entry(instance.name)
        in_flight = "" if open_entry is None else f"another change of {instance.name} is in flight"
        return preflight(instance, request, frozen=frozen, in_flight=in_flight)

    async def _change(self, gate: GateRuntime, target: str, policy: str, cap: int) -> CapResult:
        def result(
            state: CapState, before: int | None, after: int | None, outcome: str
        ) -> CapResult:
            return CapResult(target, policy, state, before, after, outcome)

        try:
            before = await gate.read_cap()
        except GovernorError as exc:
            return result(CAP_REFUSED, None, None, f"cannot read the cap at {gate.where}: {exc}")
        if before == cap:
            return result(CAP_UNCHANGED, before, before, f"the cap is {before} already")
        try:
            after = await gate.write_cap(cap)
        except GovernorError as exc:
            why = f"setting it failed: {exc}"
            return result(*await self._revert(gate, cap, before, why))
        if after != cap:
            return result(*await self._revert(gate, cap, before, f"read back {after}"))
        return result(CAP_APPLIED, before, after, f"cap {_shown(before)} -> {after}")

    async def _revert(
        self, gate: GateRuntime, cap: int, before: int | None, why: str
    ) -> tuple[CapState, int | None, int | None, str]:
        """Put the cap back as it was; ``failed`` when that cannot be confirmed."""
        asked = f"asked {cap} at {gate.where}, {why}"
        if before is None:
            # No limit cannot be set back (0 is refused); the gate is as HAProxy left it.
            after = await _read_or_none(gate)
            outcome = f"{asked}; no cap to go back to, the gate holds {_shown(after)}"
            return CAP_FAILED, before, after, outcome
        try:
            after = await gate.write_cap(before)
        except GovernorError as exc:
            outcome = f"{asked}; setting {before} back failed too: {exc}"
            after = await _read_or_none(gate)
            return CAP_FAILED, before, after, outcome
        state = CAP_REVERTED if after == before else CAP_FAILED
        outcome = f"{asked}; set back to {before}, read back {_shown(after)}"
        return state, before, after, outcome


async def _read_or_none(gate: GateRuntime) -> int | None:
    try:
        return await gate.read_cap()
    except GovernorError:
        return None


def _shown(cap: int | None) -> str:
    return "none" if cap is None else str(cap)
