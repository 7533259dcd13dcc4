"""The ETA extrapolates this run's rate, and is unknown (not zero) before it has one."""

from __future__ import annotations

import pytest

from daemon.batch.progress import RunStart, eta_s
from daemon.batch.retries import retryable_failure, retryable_status


@pytest.mark.parametrize(
    ("total", "done", "start", "now", "expected"),
    [
        (100, 100, None, 5.0, 0.0),
        (100, 10, None, 5.0, None),
        (100, 10, RunStart(0.0, 10), 5.0, None),
        (100, 30, RunStart(0.0, 10), 10.0, 35.0),
        (100, 30, RunStart(10.0, 10), 10.0, None),
    ],
)
def test_eta(
    total: int, done: int, start: RunStart | None, now: float, expected: float | None
) -> None:
    assert eta_s(total, done, start, now) == expected


def test_what_is_retried() -> None:
    assert [s for s in (200, 400, 404, 429, 500, 503) if retryable_status(s)] == [429, 500, 503]
    assert retryable_failure("refused")
    assert not retryable_failure("invalid")
