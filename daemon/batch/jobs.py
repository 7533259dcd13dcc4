"""A batch job's record: its states, its lines' states, and where its results go.

A job moves ``queued`` → ``running`` → ``completed``, or is ``paused`` (by a person; back to
``queued`` on resume), ``cancelling`` → ``cancelled`` (the lines not done are written to the
errors file as ``batch_cancelled``), ``expired`` (its deadline passed; the rest written as
``batch_expired``) or ``failed`` (its input file changed or vanished; nothing more is sent).
``cancelling`` is kept on disk so that a crash during a cancel finishes it on restart.

A line is ``pending`` → ``in_flight`` (sent; after a crash it is sent again unless its result
is already in a result file) → ``done`` (its result is in the output or errors file).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path


class JobState(StrEnum):
    """Where a job is in its life."""

    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    EXPIRED = "expired"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        """Whether nothing more will happen to the job."""
        return self in _FINISHED

    @property
    def runnable(self) -> bool:
        """Whether the runner should take the job up (a crash may have left it running)."""
        return self in _RUNNABLE


_FINISHED = frozenset({JobState.CANCELLED, JobState.COMPLETED, JobState.EXPIRED, JobState.FAILED})
_RUNNABLE = frozenset({JobState.QUEUED, JobState.RUNNING, JobState.CANCELLING})


class LineState(StrEnum):
    """Where one request of a job is."""

    PENDING = "pending"
    IN_FLIGHT = "in_flight"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class BatchJob:
    """One job as the ledger holds it.

    Attributes:
        job_id: ``batch_`` and 16 hex digits.
        input_path: The input file (absolute).
        input_sha256: Its bytes' digest when accepted; a changed file fails the job.
        target: The ``[[vllm]]`` instance the requests go to.
        state: See the module docstring.
        submitted_at: When it was accepted.
        deadline: After this, no request is sent; the rest is written as expired.
        total: Its number of requests.
        reason: Why it failed, or who paused or cancelled it.
    """

    job_id: str
    input_path: Path
    input_sha256: str
    target: str
    state: JobState
    submitted_at: datetime
    deadline: datetime | None
    total: int
    reason: str = ""

    @property
    def output_path(self) -> Path:
        """``NAME.output.jsonl`` beside ``NAME.jsonl``: the 2xx answers."""
        return result_path(self.input_path, "output")

    @property
    def errors_path(self) -> Path:
        """``NAME.errors.jsonl`` beside ``NAME.jsonl``: everything else."""
        return result_path(self.input_path, "errors")


def result_path(input_path: Path, kind: str) -> Path:
    """``NAME.KIND.jsonl`` beside ``input_path`` (``NAME.jsonl``, or any other name)."""
    stem = input_path.name.removesuffix(".jsonl")
    return input_path.with_name(f"{stem}.{kind}.jsonl")
