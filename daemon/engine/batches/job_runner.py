"""Running one batch job: resume where a crash left it, send its lines, write each result once.

On start the runner re-reads the input file (a file changed since it was accepted fails the
job: its lines would no longer be the ones the ledger counts), reconciles the ledger with the
result files (:meth:`BatchLedger.reconcile`: a line whose result is in a file is done; a line
that was in flight is sent again), then sends the lines not done, ``concurrency`` at a time.

For each line, in this order: the ledger marks it in flight; the request is sent (with its
retries); the result is appended to its file and ``fsync``-ed; the ledger marks it done. The
last two steps run with no ``await`` between them, so a pause or a cancel (which cancel the
requests in flight) never separates them; only a crash can, and reconciling covers that.
Requests are therefore sent *at least* once (a request in flight at a crash, or at a pause, is
sent again) and their results written *exactly* once.

The requests go through the target's batch lane (:mod:`.lanes`): a worker waits for room in
the lane before each line, and a line whose request the lane cancels (it narrowed or closed)
goes back to pending and is sent again when there is room; the job keeps running meanwhile.
Without a lane (tests of the runner alone), it runs at ``[batch] concurrency``.

A pause or a cancel stops the requests in flight at once. Paused, the job waits to be
resumed; cancelled (or past its deadline), every line not done gets a ``batch_cancelled``
(``batch_expired``) line in the errors file, as OpenAI writes them, so that every custom_id of
the input appears exactly once across the two result files.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque

from daemon.batch.errors import BatchFileError
from daemon.batch.input_file import BatchLine, read_batch_file
from daemon.batch.jobs import BatchJob, JobState
from daemon.batch.own_traffic import usage_of
from daemon.batch.progress import RunStart
from daemon.batch.result_files import ResultWriter
from daemon.batch.result_lines import CANCELLED, EXPIRED, ResultFile, ResultLine, failed
from daemon.core.batch_settings import BatchSection
from daemon.core.clock import Clock
from daemon.core.http_client import HttpExchange, http_request
from daemon.engine.batches.crash_points import CrashPoints
from daemon.engine.batches.lanes import Lane
from daemon.engine.batches.line_sender import LineSender
from daemon.engine.batches.prefill_pieces import PrefillPieces
from daemon.engine.storage.batch_ledger import BatchLedger

log = logging.getLogger(__name__)

_UNSENT = {
    JobState.CANCELLED: (CANCELLED, "the batch job was cancelled before this request was done"),
    JobState.EXPIRED: (EXPIRED, "the batch job's deadline passed before this request was done"),
}


class JobRunner:
    """Runs one job until it is done, paused, cancelled, expired or failed."""

    def __init__(
        self,
        job: BatchJob,
        ledger: BatchLedger,
        settings: BatchSection,
        *,
        base_url: str,
        clock: Clock,
        crash_points: CrashPoints,
        lane: Lane | None = None,
        exchange: HttpExchange = http_request,
    ) -> None:
        self.job = job
        self._lane = lane if lane is not None else Lane(job.target, settings.concurrency, "fixed")
        self._ledger = ledger
        self._settings = settings
        self._clock = clock
        self._crash = crash_points
        pieces = None
        if settings.prefill_piece_tokens > 0:
            pieces = PrefillPieces(
                base_url,
                settings.prefill_piece_tokens,
                self._lane.piece_slots(settings.prefill_pieces_in_flight),
                settings.request_timeout_s,
                priority=lambda: self._lane.priority,
                tally=lambda usage: self._lane.tally.answered(clock.monotonic(), usage),
                exchange=exchange,
            )
        self._sender = LineSender(
            job.job_id,
            base_url,
            settings,
            clock,
            priority=lambda: self._lane.priority,
            exchange=exchange,
            pieces=pieces,
        )
        self._writers = {
            ResultFile.OUTPUT: ResultWriter(job.output_path),
            ResultFile.ERRORS: ResultWriter(job.errors_path),
        }
        self._stop: JobState | None = None
        self._sending: asyncio.Task[None] | None = None
        self.started: RunStart | None = None

    def stop(self, state: JobState) -> None:
        """Stop sending (``PAUSED`` or ``CANCELLING``): the requests in flight are cancelled."""
        self._stop = state
        if self._sending is not None:
            self._sending.cancel()

    async def run(self) -> JobState:
        """Run the job; return the state it ended in (also in the ledger)."""
        try:
            return await self._run()
        finally:
            for writer in self._writers.values():
                writer.close()

    async def _run(self) -> JobState:
        job = self.job
        lines = await self._input_lines()
        if lines is None:
            return JobState.FAILED
        # Reading back a large output file takes a while: not on the event loop.
        written = await asyncio.to_thread(
            lambda: [cid for writer in self._writers.values() for cid in writer.reconcile()]
        )
        self._ledger.reconcile(job.job_id, written)
        if job.state is JobState.CANCELLING or self._stop is JobState.CANCELLING:
            return self._finish(JobState.CANCELLED)
        if self._stop is JobState.PAUSED:
            return JobState.PAUSED
        await self._send(lines)
        return self._outcome()

    async def _send(self, lines: dict[int, BatchLine]) -> None:
        """Send the lines not done, until all are, or the job stops or passes its deadline."""
        job = self.job
        self._ledger.set_state(job.job_id, JobState.RUNNING)
        todo = deque(lines[line_no] for line_no, _ in self._ledger.not_done(job.job_id))
        self.started = RunStart(self._clock.monotonic(), job.total - len(todo))
        log.info("batch job running", extra={"job": job.job_id, "lines_left": len(todo)})
        sending = asyncio.create_task(self._send_all(todo), name=f"batch {job.job_id} requests")
        self._sending = sending
        try:
            await asyncio.wait({sending})
        except asyncio.CancelledError:  # the daemon is stopping: stop the requests too
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sending
            raise
        if not sending.cancelled() and (failure := sending.exception()) is not None:
            # The task group wraps what failed (a disk refusing a result): raise the first.
            while isinstance(failure, BaseExceptionGroup):
                failure = failure.exceptions[0]
            raise failure

    def _outcome(self) -> JobState:
        """End the job as its sending ended: stopped, expired or complete."""
        job = self.job
        if self._stop is JobState.CANCELLING:
            return self._finish(JobState.CANCELLED)
        if self._stop is JobState.PAUSED:
            # The ledger says paused since the request; the lines cut off are sent on resume.
            self._ledger.reconcile(job.job_id, [])
            return JobState.PAUSED
        if self._ledger.not_done(job.job_id):
            return self._finish(JobState.EXPIRED)
        self._ledger.set_state(job.job_id, JobState.COMPLETED)
        log.info("batch job completed", extra={"job": job.job_id, "lines": job.total})
        return JobState.COMPLETED

    async def _input_lines(self) -> dict[int, BatchLine] | None:
        """The input's lines by number; None (the job failed) if the file changed."""
        job = self.job
        try:
            batch = await asyncio.to_thread(
                read_batch_file,
                job.input_path,
                max_bytes=self._settings.max_file_bytes,
                max_lines=self._settings.max_lines,
            )
        except BatchFileError as exc:
            self._fail(f"the input file is no longer valid: {exc}")
            return None
        if batch.sha256 != job.input_sha256:
            self._fail(
                "the input file changed since it was submitted; its lines are no longer the "
                "ones counted (submit the new file as a new job)"
            )
            return None
        return {line.line_no: line for line in batch.lines}

    def _fail(self, reason: str) -> None:
        log.error("batch job failed", extra={"job": self.job.job_id, "reason": reason})
        self._ledger.set_state(self.job.job_id, JobState.FAILED, reason)

    async def _send_all(self, todo: deque[BatchLine]) -> None:
        workers = min(self._settings.concurrency, len(todo))
        async with asyncio.TaskGroup() as group:
            for index in range(workers):
                group.create_task(self._send_some(todo), name=f"batch worker {index}")

    async def _send_some(self, todo: deque[BatchLine]) -> None:
        """Take lines one at a time until none is left, the job stops, or its deadline passes."""
        job_id = self.job.job_id
        while todo and self._stop is None and not self._past_deadline():
            if not await self._room_in_lane():
                return  # the deadline passed while the lane was full or closed
            if not todo or self._stop is not None:
                return
            line = todo.popleft()
            self._ledger.sending(job_id, line.line_no)
            self._crash.reached("sent")
            send = self._lane.start(self._sender.send(line), name=f"batch line {line.line_no}")
            try:
                await asyncio.wait({send})
            except asyncio.CancelledError:  # the job stops: its request stops too
                send.cancel()
                raise
            if send.cancelled():  # the lane narrowed: the line waits for room again
                self._ledger.back_to_pending(job_id, line.line_no)
                todo.appendleft(line)
                continue
            result = send.result()
            if (usage := usage_of(result.data)) is not None:
                self._lane.tally.answered(self._clock.monotonic(), usage)
            self._record(line.line_no, result)

    async def _room_in_lane(self) -> bool:
        """Wait for room in the lane; False when the job's deadline passes first."""
        deadline = self.job.deadline
        if deadline is None:
            await self._lane.room()
            return True
        try:
            async with asyncio.timeout((deadline - self._clock.wall()).total_seconds()):
                await self._lane.room()
        except TimeoutError:
            return False
        return True

    def _record(self, line_no: int, result: ResultLine) -> None:
        """Write a result, then mark its line done; no ``await`` may come between the two."""
        self._writers[result.file].append(result.data)
        self._crash.reached("written")
        self._ledger.done(self.job.job_id, line_no)
        self._crash.reached("marked")

    def _past_deadline(self) -> bool:
        deadline = self.job.deadline
        return deadline is not None and self._clock.wall() >= deadline

    def _finish(self, state: JobState) -> JobState:
        """Write each line not done as cancelled or expired, then end the job in ``state``."""
        code, message = _UNSENT[state]
        job_id = self.job.job_id
        for line_no, custom_id in self._ledger.not_done(job_id):
            self._record(line_no, failed(job_id, line_no, custom_id, code, message))
        self._ledger.set_state(job_id, state, self._ledger_reason())
        log.info("batch job ended", extra={"job": job_id, "state": str(state)})
        return state

    def _ledger_reason(self) -> str:
        current = self._ledger.job(self.job.job_id)
        return "" if current is None else current.reason
