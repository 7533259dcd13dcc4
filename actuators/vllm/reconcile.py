"""Reconciliation: a governor that died mid-change finishes or reverts it on its next start.

The journal says which step was reached; the files on disk and the server say what is true
now. The serving process's start time tells whether a restart happened since a step: a
restart is issued only when the process serving now is shown to predate the config that
must be in force, so no decision ever gets the same restart twice.

==========================  =====================================================  ==========
step reached                what happens                                           restarts
==========================  =====================================================  ==========
planned, written, drained   files back to last-known-good; the server, never       0 (1 if it
                            restarted by the governor, still runs it: abandoned    restarted
                                                                                   by itself)
restarting … verifying      wait until ready; the baseline process still serving   0, or the
                            may be draining under the restart command (it outlives revert's 1
                            the governor): wait for its replacement as long as
                            the command may take; still there: the restart never
                            happened (abandoned); a new process runs the new
                            config: read back and verify, then done or revert;
                            not ready in time: revert
reverting … revert_verify…  files back to last-known-good; a revert restart        0, or the
                            issued but not journaled as done may still be          missing 1
                            draining the failed process: wait for it as above;
                            a process newer than the one the revert began with
                            (or the baseline one) runs it: verify, reverted;
                            otherwise restart once (a command that exits non-zero
                            gets one look, then the entry fails and says so)
==========================  =====================================================  ==========

In a fleet, the reconcile respects the group's disruption budget (``take_slot``, the
actuator's restart slots). A server found at or after its restart, or in a revert, is down or
unverified: it takes a slot before anything else and holds it until verified healthy, as the
change would have. A change found before its restart needs no slot to put the files back; it
takes one only before the restart that puts a server that restarted by itself (or is down)
on the old files. No slot within the bound: nothing more is done, the entry stays open as
the journal says, and the result is a refusal that says why (the running governor tries
again later, on a schedule of its own).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from actuators.vllm.atomic_files import remove_stray_temporaries
from actuators.vllm.flows import (
    abandon,
    after_revert_restart,
    finish,
    reverify,
    revert,
    verify_and_finish,
)
from actuators.vllm.plan import ChangePlan
from actuators.vllm.probes import NOT_RESTARTED, Probe, same_process
from actuators.vllm.restart import CommandRunner, run_command
from actuators.vllm.steps import (
    AFTER_RESTART,
    BEFORE_RESTART,
    RECONCILING,
    RESTORED,
    REVERT_RESTARTED,
    REVERT_RESTARTING,
    ChangeSteps,
)
from daemon.api import (
    ABANDONED,
    FAILED,
    REFUSED,
    ActuationJournal,
    ActuationResult,
    Clock,
    ConfigWriteError,
    GateDrain,
    JournalEntry,
    SignalWindows,
    VllmInstance,
)

log = logging.getLogger(__name__)

SlotTaker = Callable[[], Awaitable[str]]
"""Takes a restart slot of the server's group: "" once held, else why none (see the module)."""


async def no_slot_needed() -> str:
    """The slot taker of a governor in no fleet: always held."""
    return ""


async def reconcile(
    instance: VllmInstance,
    journal: ActuationJournal,
    windows: SignalWindows,
    clock: Clock,
    gate: GateDrain | None = None,
    *,
    restart_runner: CommandRunner = run_command,
    take_slot: SlotTaker = no_slot_needed,
) -> ActuationResult | None:
    """Finish the open journal entry of ``instance``, if there is one.

    A gate the dead governor drained (a fact of the entry) admits again when the entry ends.
    ``take_slot`` is called before any restart the reconcile may issue or finish (see the
    module); without a slot the entry is left open and a refusal is returned.
    """
    for path in (instance.config_path, instance.env_file):
        if path is not None:
            for stray in remove_stray_temporaries(path):
                log.warning("removed a temporary file a crash left", extra={"path": str(stray)})
    entry = journal.open_entry(instance.name)
    if entry is None:
        return None
    steps = ChangeSteps(
        instance,
        entry.id,
        ChangePlan.from_json(entry.plan),
        entry.facts,
        journal=journal,
        windows=windows,
        clock=clock,
        gate=gate,
        restart_runner=restart_runner,
    )
    log.warning(
        "a change was left unfinished; reconciling",
        extra={"target": instance.name, "entry": entry.id, "step": entry.step},
    )
    if entry.step not in BEFORE_RESTART and (no_slot := await take_slot()):
        return _deferred(entry, no_slot)
    await steps.mark(RECONCILING, found_step=entry.step, files=steps.files_say())
    try:
        if entry.step in BEFORE_RESTART:
            return await _before_restart(steps, entry, take_slot)
        if entry.step in AFTER_RESTART:
            return await _after_restart(steps)
        return await _during_revert(steps, entry, journal)
    except ConfigWriteError as exc:
        return await finish(steps, FAILED, f"reconciling failed: {exc}", quarantine=True)


def _deferred(entry: JournalEntry, no_slot: str) -> ActuationResult:
    """The reconcile left for later: no restart slot within the bound, nothing touched."""
    outcome = (
        f"reconcile deferred (restart_slot): {no_slot}; the change stays open at step "
        f"{entry.step} as the journal says, and is tried again later"
    )
    log.warning(outcome, extra={"target": entry.target, "entry": entry.id})
    return ActuationResult(
        entry.target,
        entry.policy,
        REFUSED,
        outcome,
        entry_id=entry.id,
        refusals=(("restart_slot", no_slot),),
    )


async def _before_restart(
    steps: ChangeSteps, entry: JournalEntry, take_slot: SlotTaker
) -> ActuationResult:
    steps.write("old")
    await steps.mark(RESTORED)
    await steps.resume()
    seen = await steps.ready(not_process=None)
    baseline = steps.facts.get("baseline_start")
    if seen.ready and same_process(seen.process_start, baseline) is not False:
        why = "the governor stopped before restarting the server; it still runs the old config"
        outcome = f"abandoned, files restored, nothing restarted: {why}"
        return await finish(steps, ABANDONED, outcome)
    # The server restarted by itself (or is down) while the new files were on disk: one
    # restart puts it on the journaled last-known-good config.
    reason = "the server restarted by itself, or is down, while the change was half made"
    if no_slot := await take_slot():
        return _deferred(entry, no_slot)  # the old files are back: a later start restarts
    return await _restart_on_old(steps, reason, seen)


async def _after_restart(steps: ChangeSteps) -> ActuationResult:
    if steps.files_say() != "new":
        return await revert(steps, "the files on disk are no longer the planned ones")
    seen = await steps.ready(not_process=None)
    baseline = steps.facts.get("baseline_start")
    if seen.ready and same_process(seen.process_start, baseline):
        seen = await _replaced(steps, baseline)
        if seen.state == NOT_RESTARTED:
            return await abandon(steps, "the restart never happened: the old process still serves")
    if not seen.ready:
        return await revert(steps, f"not serving after the restart ({seen.state}: {seen.detail})")
    return await verify_and_finish(steps, seen.process_start)


async def _replaced(steps: ChangeSteps, old_process: float | None) -> Probe:
    """Wait for the process that still serves to be replaced, as long as a restart may take.

    A process that answers may be draining: vLLM keeps its port and ``/health`` while it
    finishes its requests on SIGTERM, and the restart command, in a session of its own,
    outlives the governor that started it. Only once the command's own time limit has passed
    since it began is an unreplaced process proof that the restart never happened; concluding
    earlier would put the old files back under a restart still under way (and journal a lie).
    """
    began = float(steps.facts.get("restart_at") or steps.clock.wall().timestamp())
    left = began + steps.instance.restart_timeout_s - steps.clock.wall().timestamp()
    log.warning(
        "the old server process still answers: waiting for the restart under way to replace it",
        extra={"target": steps.instance.name, "wait_s": round(max(0.0, left), 1)},
    )
    return await steps.ready(not_process=old_process, timeout_s=max(0.0, left))


async def _during_revert(
    steps: ChangeSteps, entry: JournalEntry, journal: ActuationJournal
) -> ActuationResult:
    reason = str(steps.facts.get("revert_reason", "a revert was under way"))
    steps.write("old")
    await steps.mark(RESTORED)
    seen = await steps.ready(not_process=None)
    reached = {step for _, step in journal.steps(entry.id)}
    revert_from = steps.facts.get("revert_from")
    restart_issued = REVERT_RESTARTING in reached and REVERT_RESTARTED not in reached
    if restart_issued and seen.ready and same_process(seen.process_start, revert_from):
        # The revert's restart was issued and may still be draining the failed process:
        # never issue a second one while the first can still replace it.
        seen = await _replaced(steps, revert_from)
        if seen.state == NOT_RESTARTED:
            seen = await steps.ready(not_process=None)
    if seen.ready and _runs_old(steps, seen, reached):
        return await reverify(steps, reason, seen)
    return await _restart_on_old(steps, reason, seen)


def _runs_old(steps: ChangeSteps, seen: Probe, reached: set[str]) -> bool:
    """Whether the serving process started on the last-known-good files."""
    if same_process(seen.process_start, steps.facts.get("baseline_start")):
        return True
    revert_from = steps.facts.get("revert_from")
    if revert_from is not None:
        return same_process(seen.process_start, revert_from) is False
    # Nothing served when the revert began: only a completed revert restart is proof.
    return REVERT_RESTARTED in reached


async def _restart_on_old(steps: ChangeSteps, reason: str, seen: Probe) -> ActuationResult:
    revert_from = seen.process_start if seen.ready else None
    drained = await steps.hold_gate()
    await steps.mark(
        REVERT_RESTARTING, revert_reason=reason, revert_from=revert_from, revert_drain=drained
    )
    with steps.timer.phase("revert_restart"):
        command = await steps.restart()
    result = {"exit": command.returncode, "output": command.output}
    await steps.mark(REVERT_RESTARTED, revert_restart=result)
    return await after_revert_restart(steps, reason, revert_from, command)
