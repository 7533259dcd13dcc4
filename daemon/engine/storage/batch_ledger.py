"""The batch jobs' ledger: each job and the state of each of its lines, in the state database.

A component of its own (``batches``) in ``state.sqlite3``, opened like every store
(:func:`~daemon.engine.storage.state_db.connect`: WAL, ``synchronous=FULL``, versioned
migrations). A line's ``done`` is written only after its result is on disk in a result file
(see ``daemon.batch.result_files``), so the ledger may lag the files by the line that was
being written at a crash, never lead them; :meth:`BatchLedger.reconcile` closes that gap on
resume.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from daemon.batch.input_file import BatchLine
from daemon.batch.jobs import BatchJob, JobState, LineState
from daemon.engine.storage.state_db import Schema, connect, transaction

SCHEMA = Schema(
    "batches",
    (
        """
CREATE TABLE IF NOT EXISTS batch_jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL UNIQUE,
    input_path TEXT NOT NULL, input_sha256 TEXT NOT NULL, target TEXT NOT NULL,
    state TEXT NOT NULL, submitted_at TEXT NOT NULL, deadline TEXT, total INTEGER NOT NULL,
    reason TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS batch_lines (
    job_id TEXT NOT NULL, line_no INTEGER NOT NULL, custom_id TEXT NOT NULL,
    state TEXT NOT NULL, sends INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, line_no), UNIQUE (job_id, custom_id)
);
CREATE INDEX IF NOT EXISTS batch_lines_by_state ON batch_lines (job_id, state);
""",
    ),
)
_JOB_COLUMNS = (
    "job_id, input_path, input_sha256, target, state, submitted_at, deadline, total, reason"
)


class BatchLedger:
    """The jobs and their lines, durable across crashes."""

    def __init__(self, path: Path) -> None:
        self._db = connect(path, SCHEMA)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def add(self, job: BatchJob, lines: Iterable[BatchLine]) -> None:
        """Record a new job and its lines, all pending, in one transaction."""
        deadline = None if job.deadline is None else job.deadline.isoformat()
        with transaction(self._db):
            self._db.execute(
                f"INSERT INTO batch_jobs ({_JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608 - constant columns
                (
                    job.job_id,
                    str(job.input_path),
                    job.input_sha256,
                    job.target,
                    job.state,
                    job.submitted_at.isoformat(),
                    deadline,
                    job.total,
                    job.reason,
                ),
            )
            self._db.executemany(
                "INSERT INTO batch_lines (job_id, line_no, custom_id, state) VALUES (?, ?, ?, ?)",
                ((job.job_id, line.line_no, line.custom_id, LineState.PENDING) for line in lines),
            )

    def jobs(self) -> list[BatchJob]:
        """Every job, oldest first."""
        rows = self._db.execute(f"SELECT {_JOB_COLUMNS} FROM batch_jobs ORDER BY seq")  # noqa: S608 - constant columns
        return [_job(row) for row in rows]

    def job(self, job_id: str) -> BatchJob | None:
        """The job named ``job_id``, if there is one."""
        row = self._db.execute(
            f"SELECT {_JOB_COLUMNS} FROM batch_jobs WHERE job_id = ?",  # noqa: S608 - constant columns
            (job_id,),
        ).fetchone()
        return None if row is None else _job(row)

    def next_runnable(self) -> BatchJob | None:
        """The oldest job the runner should take up (queued, running or cancelling)."""
        return next((job for job in self.jobs() if job.state.runnable), None)

    def set_state(self, job_id: str, state: JobState, reason: str = "") -> None:
        """Move a job to ``state`` (``reason`` says why, or by whom)."""
        with transaction(self._db):
            self._db.execute(
                "UPDATE batch_jobs SET state = ?, reason = ? WHERE job_id = ?",
                (state, reason, job_id),
            )

    def counts(self, job_id: str) -> dict[LineState, int]:
        """How many of the job's lines are in each state."""
        rows = self._db.execute(
            "SELECT state, COUNT(*) FROM batch_lines WHERE job_id = ? GROUP BY state", (job_id,)
        )
        found = {LineState(state): int(count) for state, count in rows}
        return {state: found.get(state, 0) for state in LineState}

    def reconcile(self, job_id: str, written: Iterable[str]) -> None:
        """Resume after a crash (or a pause): the lines whose results are ``written`` are done.

        The others that were in flight are pending again: they are sent anew.
        """
        with transaction(self._db):
            self._db.executemany(
                "UPDATE batch_lines SET state = ? WHERE job_id = ? AND custom_id = ?",
                ((LineState.DONE, job_id, custom_id) for custom_id in written),
            )
            self._db.execute(
                "UPDATE batch_lines SET state = ? WHERE job_id = ? AND state = ?",
                (LineState.PENDING, job_id, LineState.IN_FLIGHT),
            )

    def not_done(self, job_id: str) -> list[tuple[int, str]]:
        """The (line_no, custom_id) of each line not done yet, in file order."""
        rows = self._db.execute(
            "SELECT line_no, custom_id FROM batch_lines WHERE job_id = ? AND state != ?"
            " ORDER BY line_no",
            (job_id, LineState.DONE),
        )
        return [(int(line_no), str(custom_id)) for line_no, custom_id in rows]

    def sending(self, job_id: str, line_no: int) -> None:
        """Mark a line in flight, about to be sent (once more)."""
        with transaction(self._db):
            self._db.execute(
                "UPDATE batch_lines SET state = ?, sends = sends + 1"
                " WHERE job_id = ? AND line_no = ?",
                (LineState.IN_FLIGHT, job_id, line_no),
            )

    def back_to_pending(self, job_id: str, line_no: int) -> None:
        """A line whose request was cancelled before its answer (the lane narrowed): send later."""
        with transaction(self._db):
            self._db.execute(
                "UPDATE batch_lines SET state = ? WHERE job_id = ? AND line_no = ? AND state = ?",
                (LineState.PENDING, job_id, line_no, LineState.IN_FLIGHT),
            )

    def done(self, job_id: str, line_no: int) -> None:
        """Mark a line done: its result is on disk in a result file."""
        with transaction(self._db):
            self._db.execute(
                "UPDATE batch_lines SET state = ? WHERE job_id = ? AND line_no = ?",
                (LineState.DONE, job_id, line_no),
            )

    def sends(self, job_id: str) -> int:
        """How many times the job's lines were sent, resends after crashes included."""
        row = self._db.execute(
            "SELECT COALESCE(SUM(sends), 0) FROM batch_lines WHERE job_id = ?", (job_id,)
        ).fetchone()
        return int(row[0])


def _job(row: tuple[str, ...]) -> BatchJob:
    job_id, input_path, digest, target, state, submitted, deadline, total, reason = row
    return BatchJob(
        job_id=job_id,
        input_path=Path(input_path),
        input_sha256=digest,
        target=target,
        state=JobState(state),
        submitted_at=datetime.fromisoformat(submitted),
        deadline=None if deadline is None else datetime.fromisoformat(deadline),
        total=int(total),
        reason=reason,
    )
