"""The vLLM actuator: one change of one server at a time, journaled from plan to outcome.

``plan → preflight → baseline → journal (with the last-known-good files) → write → drain (the
gate first, where one fronts the server) → restart → wait ready → verify → done``, or revert
(see :mod:`actuators.vllm.flows`). Before anything is touched: the version is read from
``/version`` and its registry chosen; the files are read and edited in memory; preflight checks
freezes, forbidden flags, cross-knob rules, envelopes, staleness, dwell and budgets
(:mod:`actuators.vllm.preflight`), vLLM's own parser where it is installed, and that the server
serves now (its files are then the last-known-good config); and the signal store must cover a
window before the change (the baseline of the verification). One change per server: an
asyncio lock within this process, and the journal's one open entry per server across processes
and restarts. A refused or dry-run change is journaled too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict
from pathlib import Path

from actuators.vllm.atomic_files import FileSnapshot, snapshot
from actuators.vllm.flows import forward
from actuators.vllm.freezes import freeze_reason
from actuators.vllm.knob_reader import KnobReader
from actuators.vllm.pace import recent_changes
from actuators.vllm.plan import ChangePlan, make_plan
from actuators.vllm.preflight import Refusal, preflight, refuse
from actuators.vllm.probes import probe, read_version
from actuators.vllm.reconcile import reconcile
from actuators.vllm.registry import VersionRegistry, registry_for
from actuators.vllm.restart import CommandRunner, run_command
from actuators.vllm.steps import PLANNED, ChangeSteps, PhaseTimer, hold_if_asked
from actuators.vllm.verification import baseline_window
from actuators.vllm.vllm_args import vllm_objection
from daemon.api import (
    DRY_RUN,
    FAILED,
    NO_FREEZE_SOURCE,
    NO_RESTART_SLOTS,
    REFUSED,
    ActuationJournal,
    ActuationRefused,
    ActuationResult,
    BatchHold,
    ChangeInFlight,
    ChangeRequest,
    Clock,
    ConfigWriteError,
    FreezeSource,
    GateLookup,
    JournalState,
    RestartSlots,
    SignalWindows,
    VllmInstance,
    no_batch_hold,
    no_gates,
)

Objection = Callable[[str, Clock, Path | None], Awaitable[str]]


class VllmActuator:
    """Changes vLLM servers managed by systemd (or any service manager with a restart command).

    Args:
        journal: The engine's journal.
        windows: The engine's signal windows, for verification.
        clock: The injected clock.
        freeze_dir: Where freeze files are looked for (the governor's state directory).
        gates: The admission gate in front of an instance, if any: drained before its restart.
        restart_runner: How the restart command runs (a subprocess; the simulated host in
            ``simulate``).
        registry_of: Version text -> registry (tests substitute a stub to let a bad flag by).
        objection: vLLM's own parser check (skipped when vLLM is not installed).
        fleet_freeze: A freeze besides the files (the fleet's, in etcd); every change here
            restarts the server, so a fleet whose state is unknown holds it too.
        batches: Closes an instance's batch lane and waits for its requests: before its drain.
        restart_slots: The disruption budget (the fleet's): a slot is taken after every check
            and before the journal entry opens, and given back once the server is verified
            healthy (done, reverted or abandoned; kept after a failure).
    """

    def __init__(
        self,
        journal: ActuationJournal,
        windows: SignalWindows,
        clock: Clock,
        freeze_dir: Path,
        gates: GateLookup = no_gates,
        *,
        restart_runner: CommandRunner = run_command,
        registry_of: Callable[[str | None], VersionRegistry] = registry_for,
        objection: Objection = vllm_objection,
        fleet_freeze: FreezeSource = NO_FREEZE_SOURCE,
        restart_slots: RestartSlots = NO_RESTART_SLOTS,
        batches: BatchHold = no_batch_hold,
    ) -> None:
        self._batches = batches
        self._journal = journal
        self._windows = windows
        self._clock = clock
        self._freeze_dir = freeze_dir
        self._gates = gates
        self._restart_runner = restart_runner
        self._registry_of = registry_of
        self._objection = objection
        self._fleet_freeze = fleet_freeze
        self._restart_slots = restart_slots
        self._reader = KnobReader()
        self._locks: dict[str, asyncio.Lock] = {}

    def current_knobs(self, instance: VllmInstance) -> Mapping[str, float]:
        """What the server's files set now (cached by mtime)."""
        return self._reader.read(instance)

    async def refresh(self, instance: VllmInstance) -> None:
        """Nothing to do: :meth:`current_knobs` reads the files (by mtime) each time."""

    async def plan(self, instance: VllmInstance, request: ChangeRequest) -> ChangePlan:
        """The plan, without any check or side effect (``apply --dry-run`` prints it).

        Raises:
            ActuationRefused: the change cannot even be planned.
        """
        plan, _ = await self._plan(instance, request)
        return plan

    async def apply(
        self, instance: VllmInstance, request: ChangeRequest, *, dry_run: bool = False
    ) -> ActuationResult:
        """Make the change, or say why not; journal it either way.

        A dry run asked for (``apply --dry-run``) runs every check, so that a person sees all
        that refuses it at once; otherwise vLLM's parser and the probe of the server are
        skipped once a check has refused the change.
        """
        lock = self._locks.setdefault(instance.name, asyncio.Lock())
        async with lock:
            dry = dry_run or instance.mode == "dry-run"
            return await self._apply(instance, request, dry, all_checks=dry_run)

    async def reconcile(self, instance: VllmInstance) -> ActuationResult | None:
        """Finish or revert what a previous governor left open for ``instance``.

        In a fleet it takes a restart slot first when the server is at or past its restart
        (or before a restart it would issue), and gives it back once the server is verified
        healthy, as a change does (:mod:`actuators.vllm.reconcile`).
        """
        lock = self._locks.setdefault(instance.name, asyncio.Lock())
        async with lock:
            gate = self._gates(instance)
            result = await reconcile(
                instance,
                self._journal,
                self._windows,
                self._clock,
                gate,
                restart_runner=self._restart_runner,
                take_slot=lambda: self._restart_slots.acquire(instance.name),
            )
            if result is not None and result.state not in (FAILED, REFUSED):
                await self._restart_slots.release(instance.name)
            return result

    async def _apply(
        self, instance: VllmInstance, request: ChangeRequest, dry_run: bool, *, all_checks: bool
    ) -> ActuationResult:
        timer = PhaseTimer(self._clock)
        plan: ChangePlan | None = None
        try:
            with timer.phase("plan"):
                plan, registry = await self._plan(instance, request)
            with timer.phase("preflight"):
                baseline_start = await self._preflight(
                    instance, request, plan, registry, all_checks=all_checks
                )
        except (ActuationRefused, ChangeInFlight, ConfigWriteError) as exc:
            return self._refused(instance, request, plan, exc, timer)
        if dry_run:
            outcome = f"dry run: would write {_paths(plan)} and run {list(plan.restart)}"
            self._journal.record(
                instance.name,
                request.policy,
                state=DRY_RUN,
                outcome=outcome,
                plan=plan.as_json(),
                timings=timer.timings,
            )
            return _result(request, DRY_RUN, outcome, plan, timer)
        with timer.phase("baseline"):
            baseline = await baseline_window(instance, self._windows, self._clock)
        if baseline is None:
            why = "no fresh signals covered a window before the change: it could not be verified"
            return self._refused(
                instance, request, plan, ActuationRefused(why, "no_baseline"), timer
            )
        with timer.phase("slot"):
            no_slot = await self._restart_slots.acquire(instance.name)
        if no_slot:
            refusal = ActuationRefused(no_slot, "restart_slot")
            return self._refused(instance, request, plan, refusal, timer)
        with timer.phase("journal"):
            facts = {"baseline_start": baseline_start, "baseline": dict(baseline)}
            try:
                entry = self._journal.begin(
                    instance.name, request.policy, plan.as_json(), facts, request.forecast
                )
            except ChangeInFlight as exc:
                await self._restart_slots.release(instance.name)
                return self._refused(instance, request, plan, exc, timer)
        steps = ChangeSteps(
            instance,
            entry.id,
            plan,
            facts,
            journal=self._journal,
            windows=self._windows,
            clock=self._clock,
            gate=self._gates(instance),
            restart_runner=self._restart_runner,
            batches=self._batches,
        )
        steps.timer.timings.update(timer.timings)
        await hold_if_asked(PLANNED)
        result = await forward(steps)
        if result.state != FAILED:  # verified healthy, on the new config or the old one
            await self._restart_slots.release(instance.name)
        return result

    async def _plan(
        self, instance: VllmInstance, request: ChangeRequest
    ) -> tuple[ChangePlan, VersionRegistry]:
        if instance.config_path is None:
            message = f"{instance.name} has no config_path: the governor only observes it"
            raise ActuationRefused(message, "not_actuated")
        version = await read_version(instance.url, instance.scrape_timeout_s + 1.0)
        registry = self._registry_of(version)
        env_file = snapshot(instance.env_file) if instance.env_file is not None else None
        yaml_file = snapshot(instance.config_path)
        if not yaml_file.exists:
            message = f"{instance.config_path} does not exist: it must be the unit's --config"
            raise ActuationRefused(message, "config")
        return make_plan(instance, request, registry, yaml_file, env_file), registry

    async def _preflight(
        self,
        instance: VllmInstance,
        request: ChangeRequest,
        plan: ChangePlan,
        registry: VersionRegistry,
        *,
        all_checks: bool = False,
    ) -> float | None:
        """Every check; the serving process's start time when all pass.

        vLLM's parser and the probe run only while nothing has refused the change, unless
        ``all_checks`` (a dry run asked for, which lists every refusal).

        Raises:
            ActuationRefused: with every refusal found.
            ChangeInFlight: another change of this server is open in the journal.
        """
        now = self._clock.wall()
        recent = recent_changes(self._journal, instance.name, now)  # raises ChangeInFlight
        refusals: list[Refusal] = preflight(
            instance,
            request,
            plan,
            registry,
            frozen=freeze_reason(self._freeze_dir, instance.name, now)
            or self._fleet_freeze.freeze_reason(instance.name, now, restart=True),
            changed_at=recent.changed_at,
            now=now,
            restarted_at=recent.restarted_at,
        )
        if all_checks or not refusals:
            config_text = plan.files[0].new_text
            if objection := await self._objection(config_text, self._clock, instance.python):
                refusals.append(("vllm_parser", objection))
        if all_checks or not refusals:
            seen = await probe(instance.url, instance.scrape_timeout_s + 1.0)
            if not seen.ready:
                why = f"{instance.name} is not serving ({seen.state}): its config is not known good"
                refusals.append(("not_ready", why))
            elif not refusals:
                return seen.process_start
        raise refuse(refusals)

    def _refused(
        self,
        instance: VllmInstance,
        request: ChangeRequest,
        plan: ChangePlan | None,
        error: Exception,
        timer: PhaseTimer,
    ) -> ActuationResult:
        guard = error.guard if isinstance(error, ActuationRefused) else "in_flight"
        outcome = f"refused ({guard}): {error}"
        refusals = error.refusals if isinstance(error, ActuationRefused) else ((guard, str(error)),)
        body = plan.as_json() if plan is not None else {"request": asdict(request)}
        self._journal.record(
            instance.name,
            request.policy,
            state=REFUSED,
            outcome=outcome,
            plan=body,
            timings=timer.timings,
        )
        return _result(request, REFUSED, outcome, plan, timer, refusals=refusals)


def _result(
    request: ChangeRequest,
    state: JournalState,
    outcome: str,
    plan: ChangePlan | None,
    timer: PhaseTimer,
    *,
    refusals: tuple[tuple[str, str], ...] = (),
) -> ActuationResult:
    return ActuationResult(
        target=request.target,
        policy=request.policy,
        state=state,
        outcome=outcome,
        changes=dict(request.changes),
        timings=dict(timer.timings),
        plan=plan.as_json() if plan is not None else {},
        refusals=refusals,
    )


def _paths(plan: ChangePlan) -> str:
    changed: list[FileSnapshot] = [change.old for change in plan.files if change.changed]
    return ", ".join(str(file.path) for file in changed) or "nothing"
