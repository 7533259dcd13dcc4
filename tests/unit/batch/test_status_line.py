"""`batch status`'s line for a job: a running job says how wide its lane is, or why it is shut."""

from __future__ import annotations

from typing import Any

from daemon.app.commands.batch import status_line

ROW: dict[str, Any] = {
    "job": "batch_0123456789abcdef",
    "state": "running",
    "total": 40,
    "done": 10,
    "in_flight": 4,
    "eta_s": 90.0,
    "target": "main",
    "reason": "",
    "lane": {"width": 4, "reason": "night-batch: current + 2.0 = 4"},
}


def test_a_running_job_shows_its_lane() -> None:
    assert status_line(ROW) == (
        "batch_0123456789abcdef running: 10/40 (25%), 4 in flight, ETA 1m30s, lane 4 wide, "
        "target main"
    )
    closed = {**ROW, "in_flight": 0, "lane": {"width": 0, "reason": "no batch policy fires"}}
    assert ", lane closed (no batch policy fires), target main" in status_line(closed)
    assert "lane" not in status_line({**ROW, "state": "paused"})
