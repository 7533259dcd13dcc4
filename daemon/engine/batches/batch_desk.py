"""The batch desk: the daemon's batch runner task, and the ``batch_*`` control commands.

Jobs run inside the daemon, one at a time, oldest first: the daemon already knows each
target's URL, is the one process that stays up, and is what will open and close the batch
window from policies (issue 18). Submitting over the control socket validates the file whole
and records the job and its lines in the ledger before answering; from then on the job
survives any crash of the daemon. Pausing or cancelling a job writes its new state first
(so that a crash does not undo it), then stops its requests in flight.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from daemon.batch.errors import BatchError, BatchFileError
from daemon.batch.input_file import read_batch_file
from daemon.batch.jobs import BatchJob, JobState, LineState, result_path
from daemon.batch.progress import eta_s
from daemon.core.clock import Clock
from daemon.core.control_protocol import ControlRequest
from daemon.core.errors import ControlError
from daemon.core.http_client import HttpExchange, http_request
from daemon.core.settings import GovernorConfig
from daemon.engine.batches.batch_inbox import BatchInbox
from daemon.engine.batches.crash_points import CrashPoints
from daemon.engine.batches.job_runner import JobRunner
from daemon.engine.batches.lanes import BatchLanes
from daemon.engine.runtime.control_server import Caller, Handler
from daemon.engine.runtime.paged_replies import PagedReplies
from daemon.engine.runtime.supervisor import EternalTask, Readiness
from daemon.engine.storage.batch_ledger import BatchLedger

log = logging.getLogger(__name__)


class BatchDesk:
    """Runs the ledger's jobs and answers the batch commands."""

    def __init__(
        self,
        config: Callable[[], GovernorConfig],
        ledger_path: Path,
        clock: Clock,
        lanes: BatchLanes,
        exchange: HttpExchange = http_request,
    ) -> None:
        self._config = config
        self._lanes = lanes
        self._exchange = exchange
        self._ledger = BatchLedger(ledger_path)
        self._clock = clock
        self._crash_points = CrashPoints()
        self._wake = asyncio.Event()
        self._runner: JobRunner | None = None
        # Jobs are kept for good: a long-lived daemon's list outgrows one reply.
        self._pages = PagedReplies(clock)
        self._inbox = BatchInbox(config, self._accept_dropped, self.known)

    def close(self) -> None:
        """Close the ledger."""
        self._ledger.close()

    def tasks(self) -> list[EternalTask]:
        """The runner of the jobs, and the watcher of the inbox."""
        return [EternalTask("batch runner", self.run), EternalTask("batch inbox", self._inbox.run)]

    async def _accept_dropped(self, input_path: Path, target: str, by: str) -> BatchJob:
        return await self.accept(input_path, target, by)

    def lane_status(self) -> dict[str, dict[str, Any]]:
        """Each target's batch lane (``status``): width, in flight, who set it and why."""
        return self._lanes.status()

    def handlers(self) -> Mapping[str, Handler]:
        """The control commands, by name."""
        return {
            "batch_submit": self._submit,
            "batch_status": self._status,
            "batch_pause": self._pause,
            "batch_resume": self._resume,
            "batch_cancel": self._cancel,
        }

    async def run(self, readiness: Readiness) -> None:
        """The eternal task: run each runnable job in turn, and wait for one when none is."""
        readiness.started()
        while True:
            self._wake.clear()
            job = self._ledger.next_runnable()
            if job is None:
                await self._wake.wait()
                continue
            await self._run_job(job)

    async def _run_job(self, job: BatchJob) -> None:
        config = self._config()
        instance = next((i for i in config.vllm if i.name == job.target), None)
        if instance is None:
            reason = f"the target {job.target!r} is no longer configured ([[vllm]] name)"
            self._ledger.set_state(job.job_id, JobState.FAILED, reason)
            return
        runner = JobRunner(
            job,
            self._ledger,
            config.batch,
            base_url=instance.url,
            clock=self._clock,
            crash_points=self._crash_points,
            lane=self._lanes.lane(job.target),
            exchange=self._exchange,
        )
        self._runner = runner
        try:
            await runner.run()
        except (OSError, BatchError) as exc:
            # A disk that refuses the results: the job stops, the daemon does not; resume it
            # once the disk is fixed.
            reason = f"stopped: {exc}"
            log.exception("batch job stopped", extra={"job": job.job_id, "reason": reason})
            self._ledger.set_state(job.job_id, JobState.FAILED, reason)
        finally:
            self._runner = None

    async def _submit(self, request: ControlRequest, caller: Caller) -> dict[str, Any]:
        args = request.args
        path, target, deadline = args.get("path"), args.get("target"), args.get("deadline")
        if not isinstance(path, str) or not Path(path).is_absolute():
            message = "'path' must be the input file's absolute path"
            raise ControlError(message)
        if not isinstance(target, str):
            message = "'target' must be a [[vllm]] instance's name"
            raise ControlError(message)
        when = _deadline(deadline, self._clock.wall())
        try:
            job = await self.accept(Path(path), target, caller.user, deadline=when)
        except BatchFileError as exc:
            message = f"the file was refused, nothing of it will run:\n{exc}"
            raise ControlError(message) from exc
        return self._row(job)

    async def accept(
        self, input_path: Path, target: str, by: str, *, deadline: datetime | None = None
    ) -> BatchJob:
        """Validate ``input_path`` whole and queue it as a job for ``target``.

        Raises:
            BatchError: the target is unknown, the file is already a job or its result files
                exist; BatchFileError: the file is invalid (every problem, file:line).
        """
        config = self._config()
        targets = [instance.name for instance in config.vllm]
        if target not in targets:
            message = f"unknown target {target!r}: name a [[vllm]] instance ({', '.join(targets)})"
            raise BatchError(message)
        self._refuse_shared_results(input_path)
        batch = await asyncio.to_thread(
            read_batch_file,
            input_path,
            max_bytes=config.batch.max_file_bytes,
            max_lines=config.batch.max_lines,
        )
        self._refuse_shared_results(input_path)  # again: another submit may have come meanwhile
        job = BatchJob(
            job_id=f"batch_{secrets.token_hex(8)}",
            input_path=input_path,
            input_sha256=batch.sha256,
            target=target,
            state=JobState.QUEUED,
            submitted_at=self._clock.wall(),
            deadline=deadline,
            total=len(batch.lines),
            reason=f"submitted by {by}",
        )
        self._ledger.add(job, batch.lines)
        log.info("batch job submitted", extra={"job": job.job_id, "lines": job.total})
        self._wake.set()
        return job

    def known(self, input_path: Path) -> bool:
        """Whether a job (in any state) was made of ``input_path``."""
        return any(job.input_path == input_path for job in self._ledger.jobs())

    def _refuse_shared_results(self, input_path: Path) -> None:
        """A job's results are never mixed with another's: refuse when they would be."""
        for job in self._ledger.jobs():
            if job.input_path == input_path and not job.state.finished:
                message = f"{input_path} is already job {job.job_id} ({job.state})"
                raise BatchError(message)
        for kind in ("output", "errors"):
            result = result_path(input_path, kind)
            if result.exists():
                message = f"{result} already exists: move it away first (results are not mixed)"
                raise BatchError(message)

    async def _status(self, request: ControlRequest, _caller: Caller) -> dict[str, Any]:
        if request.args.get("job") is not None:
            return {"jobs": [self._row(self._job(request))], "next_offset": None}
        page = self._pages.page(
            request.args, lambda: [self._row(job) for job in self._ledger.jobs()]
        )
        return {"jobs": page.rows, "next_offset": page.next_offset, "snapshot": page.snapshot}

    async def _pause(self, request: ControlRequest, caller: Caller) -> dict[str, Any]:
        job = self._job(request)
        if job.state not in (JobState.QUEUED, JobState.RUNNING):
            message = f"{job.job_id} is {job.state}: only a queued or running job can be paused"
            raise ControlError(message)
        return self._stop(job, JobState.PAUSED, f"paused by {caller.user}")

    async def _cancel(self, request: ControlRequest, caller: Caller) -> dict[str, Any]:
        job = self._job(request)
        if job.state.finished or job.state is JobState.CANCELLING:
            message = f"{job.job_id} is {job.state} already"
            raise ControlError(message)
        answer = self._stop(job, JobState.CANCELLING, f"cancelled by {caller.user}")
        self._wake.set()  # a queued or paused job is cancelled by the runner too
        return answer

    async def _resume(self, request: ControlRequest, caller: Caller) -> dict[str, Any]:
        job = self._job(request)
        if job.state not in (JobState.PAUSED, JobState.FAILED):
            message = f"{job.job_id} is {job.state}: only a paused or failed job can be resumed"
            raise ControlError(message)
        self._ledger.set_state(job.job_id, JobState.QUEUED, f"resumed by {caller.user}")
        self._wake.set()
        return self._row(self._job(request))

    def _stop(self, job: BatchJob, state: JobState, reason: str) -> dict[str, Any]:
        self._ledger.set_state(job.job_id, state, reason)
        runner = self._runner
        if runner is not None and runner.job.job_id == job.job_id:
            runner.stop(state)
        log.info("batch job stopping", extra={"job": job.job_id, "state": str(state)})
        current = self._ledger.job(job.job_id)
        assert current is not None  # jobs are never deleted
        return self._row(current)

    def _job(self, request: ControlRequest) -> BatchJob:
        job_id = request.args.get("job")
        job = self._ledger.job(job_id) if isinstance(job_id, str) else None
        if job is None:
            message = f"no batch job {job_id!r} (see 'vllm-governor batch status')"
            raise ControlError(message)
        return job

    def _row(self, job: BatchJob) -> dict[str, Any]:
        counts = self._ledger.counts(job.job_id)
        done = counts[LineState.DONE]
        runner = self._runner
        start = runner.started if runner is not None and runner.job.job_id == job.job_id else None
        eta = eta_s(job.total, done, start, self._clock.monotonic())
        return {
            "job": job.job_id,
            "state": str(job.state),
            "target": job.target,
            "input": str(job.input_path),
            "output": str(job.output_path),
            "errors": str(job.errors_path),
            "total": job.total,
            "done": done,
            "in_flight": counts[LineState.IN_FLIGHT],
            "pending": counts[LineState.PENDING],
            "sends": self._ledger.sends(job.job_id),
            "eta_s": None if eta is None else round(eta, 1),
            "submitted_at": job.submitted_at.isoformat(timespec="seconds"),
            "deadline": None if job.deadline is None else job.deadline.isoformat(),
            "reason": job.reason,
            "lane": self._lanes.lane(job.target).status(),
        }


def _deadline(value: object, now: datetime) -> datetime | None:
    """The deadline an ISO 8601 string names (with its time zone), or None when absent."""
    if value is None:
        return None
    try:
        deadline = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        deadline = None
    if deadline is None or deadline.tzinfo is None:
        message = f"'deadline' must be ISO 8601 with a zone (2026-12-01T06:00Z), not {value!r}"
        raise ControlError(message)
    if deadline <= now:
        message = f"the deadline {value} has passed already"
        raise ControlError(message)
    return deadline
