"""The steps of one journaled change, each recorded before or after it happens.

Forward: ``planned`` (journal entry opened with the last-known-good files) → ``written`` →
``drained`` → ``restarting`` → ``restarted`` → ``ready`` → ``verifying`` → finished ``done``.
Revert, on any failure after the first write: ``reverting`` → ``revert_written`` →
``revert_restarting`` → ``revert_restarted`` → ``revert_ready`` → ``revert_verifying`` →
finished ``reverted`` (or ``failed`` when the server does not come back). A step that starts
something (a restart) is journaled *before* it, a step that observes something *after* it,
so the journal always errs towards "it may have happened" and reconciliation checks.

Test hook: with ``VLLM_GOVERNOR_TEST_HOLD_AFTER_STEP=STEP:SECONDS`` in its environment, the
governor waits that long right after journaling STEP, so that a test can kill it exactly there.
It only delays; it changes no decision. Production units never set it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum
from typing import Any, Literal, TypeVar

from actuators.vllm.atomic_files import atomic_write, snapshot
from actuators.vllm.drain_watch import DrainWatch
from actuators.vllm.plan import ChangePlan
from actuators.vllm.probes import Probe, post, wait_ready
from actuators.vllm.read_back import ReadBack, log_mark, read_back
from actuators.vllm.restart import CommandResult, CommandRunner, run_command
from actuators.vllm.verification import Verdict, verify
from daemon.api import (
    ActuationJournal,
    BatchHold,
    Clock,
    GateDrain,
    GovernorError,
    SignalWindows,
    VllmInstance,
    no_batch_hold,
)


class Step(StrEnum):
    """The steps a change's journal entry goes through (its ``step`` column and step rows)."""

    PLANNED = "planned"
    WRITTEN = "written"
    DRAINED = "drained"
    RESTARTING = "restarting"
    RESTARTED = "restarted"
    READY = "ready"
    VERIFYING = "verifying"
    REVERTING = "reverting"
    REVERT_WRITTEN = "revert_written"
    REVERT_RESTARTING = "revert_restarting"
    REVERT_RESTARTED = "revert_restarted"
    REVERT_READY = "revert_ready"
    REVERT_VERIFYING = "revert_verifying"
    RECONCILING = "reconciling"
    RESTORED = "restored"


PLANNED, WRITTEN, DRAINED = Step.PLANNED, Step.WRITTEN, Step.DRAINED
RESTARTING, RESTARTED, READY = Step.RESTARTING, Step.RESTARTED, Step.READY
VERIFYING, REVERTING, REVERT_WRITTEN = Step.VERIFYING, Step.REVERTING, Step.REVERT_WRITTEN
REVERT_RESTARTING, REVERT_RESTARTED = Step.REVERT_RESTARTING, Step.REVERT_RESTARTED
REVERT_READY, REVERT_VERIFYING = Step.REVERT_READY, Step.REVERT_VERIFYING
RECONCILING, RESTORED = Step.RECONCILING, Step.RESTORED

BEFORE_RESTART = (PLANNED, WRITTEN, DRAINED)
Side = Literal["new", "old"]  # the planned files, or the last-known-good ones
GATE_HELD = "gate_held"  # the journal fact of a gate drained for a restart, until it admits again
GATE_POLL_S = 0.25
OPERATOR_STATES = ("DRAIN", "MAINT")  # HAProxy's status of a server out of rotation by command
GATE_TRIES = 3
AFTER_RESTART = (RESTARTING, RESTARTED, READY, VERIFYING)
HOLD_HOOK = "VLLM_GOVERNOR_TEST_HOLD_AFTER_STEP"
MAX_NUM_SEQS = "max_num_seqs"
T = TypeVar("T")


class PhaseTimer:
    """Seconds spent per phase, on the injected clock."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.timings: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block; a phase entered twice adds up."""
        started = self._clock.monotonic()
        try:
            yield
        finally:
            took = self._clock.monotonic() - started
            self.timings[name] = round(self.timings.get(name, 0.0) + took, 4)


class ChangeSteps:
    """The operations of one journal entry: write, drain, restart, wait, verify.

    Everything it needs to resume after a crash is in the entry's plan and facts, so a
    reconciling governor builds one from the journal alone.
    """

    def __init__(
        self,
        instance: VllmInstance,
        entry_id: int,
        plan: ChangePlan,
        facts: Mapping[str, Any],
        *,
        journal: ActuationJournal,
        windows: SignalWindows,
        clock: Clock,
        gate: GateDrain | None = None,
        restart_runner: CommandRunner = run_command,
        batches: BatchHold = no_batch_hold,
    ) -> None:
        self.instance = instance
        self.batches = batches
        self.restart_runner = restart_runner
        self.entry_id = entry_id
        self.plan = plan
        self.facts: dict[str, Any] = dict(facts)
        self.journal = journal
        self.windows = windows
        self.clock = clock
        self.gate = gate
        self.timer = PhaseTimer(clock)

    async def mark(self, step: Step, **facts: Any) -> None:
        """Journal ``step`` (durably) with new facts."""
        self.facts.update(facts)
        self.journal.step(self.entry_id, step, facts)
        await hold_if_asked(step)

    def files_say(self) -> Side | Literal["other"]:
        """``new``, ``old`` or ``other``: which side of the plan the files on disk match."""
        texts = [snapshot(change.path).text for change in self.plan.files]
        if texts == [change.new_text for change in self.plan.files]:
            return "new"
        if texts == [change.old.text for change in self.plan.files]:
            return "old"
        return "other"

    def write(self, side: Side) -> None:
        """Write every file's ``new`` or ``old`` content, atomically, where it differs.

        A file the plan found missing is removed again when going back to ``old``.

        Raises:
            ConfigWriteError: a file could not be replaced (it is intact).
        """
        for change in self.plan.files:
            if side == "old" and not change.old.exists:
                change.path.unlink(missing_ok=True)
                continue
            text = change.new_text if side == "new" else change.old.text
            if snapshot(change.path).text != text:
                atomic_write(change.path, text, change.old.mode)

    async def drain(self) -> str:
        """Drain before the restart; returns what was done, for the journal.

        The governor's own batch requests go first: the lane is closed and its requests in
        flight end (they are sent again after the change). With a gate, the gate stops
        admitting next (journaled before the command, so that a governor killed now knows to
        lift it) and the requests inside are given up to the gate's ``drain_timeout_s`` to
        finish; vLLM then drains what is left on SIGTERM.
        """
        batches = await self.batches(self.instance.name)
        held = await self.hold_gate()
        vllm = await self._drain_vllm()
        done = vllm if held is None else f"{held}; then {vllm}"
        return f"{batches}; then {done}" if batches else done

    async def hold_gate(self) -> str | None:
        """Stop the gate admitting and wait for the requests inside; None without a gate.

        Each command is tried a few times (a busy HAProxy may miss one exchange's bound). A
        gate that still cannot be reached is not a reason to keep a server on a config about
        to be replaced: the restart goes on, and vLLM's own drain is all there is.
        """
        if self.gate is None:
            return None
        gate = self.gate
        where = gate.where
        if self.facts.get(GATE_HELD):
            return f"gate {where} still drained by this change"
        before, error = await _tried(gate.status)
        if before is None:
            return f"the gate {where} could not be read, so not drained ({error})"
        if before.startswith(OPERATOR_STATES):
            # Someone put the server out of rotation on purpose: neither drain nor, after the
            # restart, lift what is theirs to lift.
            return f"gate {where} already {before}: left as it is"
        self.mark_facts(**{GATE_HELD: where})
        status, error = await _tried(gate.hold)
        if status is None:
            return f"the gate {where} could not be drained ({error})"
        left, waited = await self._wait_for_requests_inside()
        inside = "unknown" if left is None else str(left)
        return (
            f"gate {where} drained ({status}), {inside} request(s) still inside after "
            f"{waited:.1f} s"
        )

    async def follow_gate(self, side: Side) -> str | None:
        """Keep the gate's cap where its controller had it, in the server now on ``side``.

        A cap at the old ``max-num-seqs`` was a gate as open as vLLM allowed: it opens to the
        new value, or a raise of ``max-num-seqs`` would stay throttled at the old one until
        this change ends (the gate's controller moves no cap while a change of the server is
        in flight), verification window included. A cap above the new value comes down to it.
        Any other cap is the controller's and stays, so that the windows verification
        compares saw the same gate. None when there is nothing to follow.
        """
        if self.gate is None or MAX_NUM_SEQS not in self.plan.knobs:
            return None
        planned_old, planned_new = self.plan.knobs[MAX_NUM_SEQS]
        if planned_old is None:
            return None
        old, new = (planned_old, planned_new) if side == "new" else (planned_new, planned_old)
        gate = self.gate
        cap, error = await _tried(gate.read_cap)
        if cap is None:
            why = error or "the gate has no cap"
            self.mark_facts(gate_follow_error=why)
            return f"the gate {gate.where}'s cap could not be read, so it was left: {why}"
        if cap < old and cap <= new:
            return None
        written, error = await _tried(lambda: gate.write_cap(int(new)))
        if written is None:
            self.mark_facts(gate_follow_error=error or "no cap read back")
            return f"the gate {gate.where}'s cap could not follow max-num-seqs: {error}"
        self.mark_facts(gate_cap_followed=[cap, written])
        return f"gate cap {cap} -> {written}, with max-num-seqs {old:g} -> {new:g}"

    async def admit_gate(self) -> str | None:
        """Let the gate admit again, if this change (or a governor before) drained it.

        Tried a few times: a gate left draining refuses every request. None when no gate
        was held.
        """
        held = self.facts.get(GATE_HELD)
        if self.gate is None or not held:
            return None
        status, error = await _tried(self.gate.admit)
        if status is None:
            self.mark_facts(gate_admit_error=error)
            return f"the gate {held} could not be set to admit again: {error}"
        self.mark_facts(**{GATE_HELD: None}, gate_admitted=status)
        return f"gate {held} admits again ({status})"

    def mark_facts(self, **facts: Any) -> None:
        """Journal facts without a new step (durably)."""
        self.facts.update(facts)
        self.journal.note(self.entry_id, facts)

    async def _wait_for_requests_inside(self) -> tuple[int | None, float]:
        """Poll the gate until nothing is inside or its drain bound passes."""
        assert self.gate is not None
        started = self.clock.monotonic()
        bound = self.instance.gate.drain_timeout_s
        while True:
            try:
                inside = await self.gate.in_flight()
            except GovernorError:
                inside = None
            waited = self.clock.monotonic() - started
            if inside is None or inside == 0 or waited >= bound:
                return inside, waited
            await asyncio.sleep(min(GATE_POLL_S, bound - waited))

    async def _drain_vllm(self) -> str:
        if self.instance.drain != "pause":
            return "on SIGTERM, per vLLM's shutdown-timeout"
        status = await post(self.instance.url, "/pause?mode=wait", self.instance.restart_timeout_s)
        if status is not None and 200 <= status < 300:
            return "paused with /pause?mode=wait"
        return f"pause unavailable (HTTP {status}); draining on SIGTERM instead"

    async def resume(self) -> None:
        """Undo a pause (a change abandoned before its restart)."""
        if self.instance.drain == "pause":
            await post(self.instance.url, "/resume", self.instance.scrape_timeout_s + 1.0)

    def restart_facts(self) -> dict[str, Any]:
        """What the read-back needs to find the new process's output: journaled before a restart."""
        return {"restart_at": self.clock.wall().timestamp(), "log_mark": log_mark(self.instance)}

    async def read_back(self) -> ReadBack:
        """What the restarted server says it runs with, against the plan's config file."""
        return await read_back(self.instance, self.plan, self.facts, self.clock)

    async def restart(self) -> CommandResult:
        """Run the restart command of the plan."""
        argv = self.plan.restart
        return await self.restart_runner(argv, self.instance.restart_timeout_s, self.clock)

    async def restart_counting_refusals(self) -> tuple[CommandResult, int | None]:
        """Run the restart command while counting what the draining server refuses."""
        watch = DrainWatch(self.instance.url, self.instance.scrape_timeout_s + 1.0, self.clock)
        await watch.start()
        async with asyncio.TaskGroup() as group:
            watching = group.create_task(watch.watch(), name="drain_watch")
            command = await self.restart()
            watching.cancel()
        return command, watch.refused()

    async def ready(self, not_process: float | None, timeout_s: float = 0.0) -> Probe:
        """Wait until the server serves again (as another process than ``not_process``).

        Waits ``ready_timeout_s``, plus ``timeout_s`` (the rest of a restart still under way).
        """
        return await wait_ready(
            self.instance.url,
            self.instance.ready_timeout_s + timeout_s,
            self.clock,
            not_process=not_process,
            probe_timeout_s=self.instance.scrape_timeout_s + 1.0,
        )

    async def verify(self, process_start: float | None) -> Verdict:
        """Watch the window and compare it with the baseline journaled at planning time."""
        baseline = self.facts.get("baseline") or {}
        return await verify(self.instance, self.windows, self.clock, baseline, process_start)


async def _tried(call: Callable[[], Awaitable[T | None]]) -> tuple[T | None, str]:
    """``call()``'s answer, tried up to GATE_TRIES times; or None and the last error."""
    error = ""
    for attempt in range(GATE_TRIES):
        try:
            return await call(), ""
        except GovernorError as exc:
            error = str(exc)
            if attempt + 1 < GATE_TRIES:
                await asyncio.sleep(GATE_POLL_S * 2**attempt)
    return None, error


async def hold_if_asked(step: Step) -> None:
    """The test hook described in the module docstring."""
    wanted = os.environ.get(HOLD_HOOK, "")
    name, _, seconds = wanted.partition(":")
    if name == step:
        await asyncio.sleep(float(seconds or "60"))
