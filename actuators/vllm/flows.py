"""The change protocol after the journal entry is open: apply, verify, and revert on failure.

Every path ends in exactly one finished journal entry. A failure after the first byte was
written leads to the revert: the last-known-good files (the plan's old contents) are written
back, the server is restarted once more and verified again, and the result asks the engine to
quarantine the policy. A change that never restarted the server is *abandoned* instead: its
files go back and nothing is restarted, since the server still runs the old config.
"""

from __future__ import annotations

import logging
from typing import Any

from actuators.vllm.probes import NOT_RESTARTED, Probe, probe, same_process
from actuators.vllm.read_back import CONTRADICTED
from actuators.vllm.restart import CommandResult
from actuators.vllm.steps import (
    DRAINED,
    READY,
    RESTARTED,
    RESTARTING,
    REVERT_READY,
    REVERT_RESTARTED,
    REVERT_RESTARTING,
    REVERT_VERIFYING,
    REVERT_WRITTEN,
    REVERTING,
    VERIFYING,
    WRITTEN,
    ChangeSteps,
)
from daemon.api import (
    ABANDONED,
    DONE,
    FAILED,
    REVERTED,
    ActuationResult,
    ConfigWriteError,
    JournalState,
)

log = logging.getLogger(__name__)


async def forward(steps: ChangeSteps) -> ActuationResult:
    """Write, drain, restart, wait until ready, verify; revert on any failure."""
    timer = steps.timer
    try:
        with timer.phase("write"):
            steps.write("new")
    except ConfigWriteError as exc:
        return await abandon(steps, f"writing the new config failed: {exc}")
    await steps.mark(WRITTEN, written_at=steps.clock.wall().timestamp())
    with timer.phase("drain"):
        drained = await steps.drain()
    await steps.mark(DRAINED, drain=drained)
    await steps.mark(RESTARTING, **steps.restart_facts())
    with timer.phase("restart"):
        command, refused = await steps.restart_counting_refusals()
    restart = {"exit": command.returncode, "output": command.output, "refused_in_drain": refused}
    await steps.mark(RESTARTED, restart=restart)
    if refused:
        log.warning(
            "the draining server refused requests (HTTP 500): no gate stopped admission first"
            if steps.gate is None
            else "the draining server refused requests (HTTP 500) that bypassed the gate",
            extra={"target": steps.instance.name, "refused": refused},
        )
    if not command.ok:
        why = f"the restart command failed ({_exit(command.returncode)}): {command.output[-300:]}"
        return await revert(steps, why.strip())
    with timer.phase("ready"):
        seen = await steps.ready(not_process=steps.facts.get("baseline_start"))
    if seen.state == NOT_RESTARTED:
        return await abandon(steps, "the restart command exited 0 but the same process serves")
    if not seen.ready:
        why = f"not ready within {steps.instance.ready_timeout_s:g} s ({seen.state}: {seen.detail})"
        return await revert(steps, why)
    await steps.mark(READY, new_start=seen.process_start)
    _said(steps, await steps.follow_gate("new"))
    # The verification needs the server's real traffic: the gate admits before it.
    await steps.admit_gate()
    return await verify_and_finish(steps, seen.process_start)


async def verify_and_finish(steps: ChangeSteps, process_start: float | None) -> ActuationResult:
    """Read back and verify the change that now serves; finish it, or revert it."""
    with steps.timer.phase("read_back"):
        stated = await steps.read_back()
    await steps.mark(VERIFYING, read_back=stated.as_json())
    if stated.state == CONTRADICTED:
        return await revert(steps, f"read-back: {stated.detail}")
    with steps.timer.phase("verify"):
        verdict = await steps.verify(process_start)
    if not verdict.ok:
        return await revert(
            steps, f"verification failed: {verdict.detail}", verdict=verdict.as_json()
        )
    await steps.mark(VERIFYING, verdict=verdict.as_json())
    return await finish(steps, DONE, f"applied and verified: {_changes(steps)}")


async def revert(steps: ChangeSteps, reason: str, **facts: Any) -> ActuationResult:
    """Write the last-known-good files back, restart once, wait, verify again."""
    serving = await probe(steps.instance.url, steps.instance.scrape_timeout_s + 1.0)
    revert_from = serving.process_start if serving.ready else None
    log.error(
        "change failed; reverting to the last-known-good config",
        extra={"target": steps.instance.name, "reason": reason},
    )
    await steps.mark(REVERTING, revert_reason=reason, revert_from=revert_from, **facts)
    try:
        with steps.timer.phase("revert_write"):
            steps.write("old")
    except ConfigWriteError as exc:
        why = f"{reason}; the last-known-good config could not be written back: {exc}"
        return await finish(steps, FAILED, why, quarantine=True)
    await steps.mark(REVERT_WRITTEN)
    with steps.timer.phase("revert_drain"):
        drained = await steps.hold_gate()
    await steps.mark(REVERT_RESTARTING, revert_drain=drained)
    with steps.timer.phase("revert_restart"):
        command = await steps.restart()
    result = {"exit": command.returncode, "output": command.output}
    await steps.mark(REVERT_RESTARTED, revert_restart=result)
    return await after_revert_restart(steps, reason, revert_from, command)


async def after_revert_restart(
    steps: ChangeSteps,
    reason: str,
    revert_from: float | None,
    command: CommandResult,
) -> ActuationResult:
    """Wait for the server on the last-known-good config, then verify it again.

    ``command`` is how the revert's restart ended. One that exited non-zero gets one look,
    not the whole ready wait: a server that restarted anyway is verified; otherwise the entry
    fails at once and says that the command failed, with its output. One that ran out of time
    may still be restarting the server, and gets the wait.
    """
    said_failed = command.returncode not in (0, None)
    with steps.timer.phase("revert_ready"):
        if said_failed:
            seen = await _one_look(steps, revert_from)
        else:
            seen = await steps.ready(not_process=revert_from)
    if not seen.ready:
        serving = f"the server did not come back ({seen.state}: {seen.detail})"
        if said_failed:
            failed = f"{_exit(command.returncode)}: {command.output[-300:]}".strip().rstrip(":")
            why = (
                f"{reason}; the last-known-good files are back, but the revert's restart "
                f"command failed ({failed}) and {serving}"
            )
        else:
            why = f"{reason}; reverted, but {serving}"
        return await finish(steps, FAILED, why, quarantine=True)
    return await reverify(steps, reason, seen)


async def _one_look(steps: ChangeSteps, revert_from: float | None) -> Probe:
    """The server after a revert restart that failed: ready only as another process."""
    seen = await probe(steps.instance.url, steps.instance.scrape_timeout_s + 1.0)
    if seen.ready and same_process(seen.process_start, revert_from):
        detail = "the process that failed the change still serves"
        return Probe(NOT_RESTARTED, seen.process_start, detail)
    return seen


async def reverify(steps: ChangeSteps, reason: str, seen: Probe) -> ActuationResult:
    """Verify the server back on its last-known-good config, and finish as reverted."""
    await steps.mark(REVERT_READY, revert_start=seen.process_start)
    _said(steps, await steps.follow_gate("old"))
    await steps.admit_gate()
    await steps.mark(REVERT_VERIFYING)
    with steps.timer.phase("revert_verify"):
        verdict = await steps.verify(seen.process_start)
    await steps.mark(REVERT_VERIFYING, revert_verdict=verdict.as_json())
    after = "" if verdict.ok else f" (still worse than before after the revert: {verdict.detail})"
    outcome = f"reverted to the last-known-good config: {reason}{after}"
    return await finish(steps, REVERTED, outcome, quarantine=True)


async def abandon(steps: ChangeSteps, reason: str) -> ActuationResult:
    """Put the files back without a restart: the server never left the old config."""
    try:
        steps.write("old")
    except ConfigWriteError as exc:
        why = f"{reason}; the old files could not be put back: {exc}"
        return await finish(steps, FAILED, why, quarantine=True)
    await steps.resume()
    return await finish(steps, ABANDONED, f"abandoned, files restored, nothing restarted: {reason}")


async def finish(
    steps: ChangeSteps, state: JournalState, outcome: str, *, quarantine: bool = False
) -> ActuationResult:
    """Let a drained gate admit again, close the journal entry and say how it ended.

    The gate admits before the entry closes: a governor killed in between finds the entry
    open, with the gate's drain in its facts, and lifts it.
    """
    if (admitted := await steps.admit_gate()) is not None:
        outcome = f"{outcome}; {admitted}"
    steps.journal.finish(steps.entry_id, state, outcome, steps.timer.timings)
    log_at = logging.INFO if state in (DONE, ABANDONED) else logging.ERROR
    log.log(
        log_at,
        "change finished",
        extra={"target": steps.instance.name, "state": state, "outcome": outcome},
    )
    return ActuationResult(
        target=steps.instance.name,
        policy=steps.plan.policy,
        state=state,
        outcome=outcome,
        changes=steps.plan.changes,
        entry_id=steps.entry_id,
        timings=dict(steps.timer.timings),
        plan=steps.plan.as_json(),
        quarantine=quarantine,
    )


def _said(steps: ChangeSteps, what: str | None) -> None:
    """Log what a step did at the gate, when it did anything."""
    if what is not None:
        log.info("gate", extra={"target": steps.instance.name, "gate": what})


def _changes(steps: ChangeSteps) -> str:
    knobs = steps.plan.knobs
    if steps.plan.operation == "restart":
        return "restarted on the config in force"
    return ", ".join(f"{knob} {_shown(old)} -> {new:g}" for knob, (old, new) in knobs.items())


def _shown(value: float | None) -> str:
    return "unknown" if value is None else f"{value:g}"


def _exit(code: int | None) -> str:
    return "did not finish" if code is None else f"exit {code}"
