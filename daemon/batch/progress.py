"""A job's progress as people read it: how much is done, and when the rest should be.

The ETA extrapolates the rate of the lines finished since the job last started running (in
this process: a rate measured before a restart says nothing of the server now). Before any
line has finished in this run, the ETA is unknown (None), not zero.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RunStart:
    """Where a run of a job began: the loop clock then, and the lines already done then."""

    monotonic: float
    done: int


def eta_s(total: int, done: int, start: RunStart | None, now: float) -> float | None:
    """Seconds until the last line is done at the rate of this run; None when unknown."""
    if done >= total:
        return 0.0
    if start is None:
        return None
    finished = done - start.done
    elapsed = now - start.monotonic
    if finished <= 0 or elapsed <= 0:
        return None
    return (total - done) * elapsed / finished
