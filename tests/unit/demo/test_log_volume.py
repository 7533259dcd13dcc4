"""The disk act's arithmetic: the budget's plan, and the directory with and without the governor."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.app.demo.log_volume import (
    FULL_AT_SHARE,
    THRESHOLD_AT_SHARE,
    LogVolume,
    bytes_by,
    directory_bytes,
    growth_without,
    log_act,
    log_lines,
    plan_volume,
    write_older_logs,
)
from daemon.app.demo.scenario import scaled_workload
from simulator.arrivals import Arrival
from simulator.server.request_log import request_log_bytes
from simulator.synthetic_workloads import generate

# One request a second, 1000-token prompts.
STEADY = [Arrival(float(t), 1000, 100) for t in range(100)]


def test_without_the_governor_every_arrival_writes_its_line() -> None:
    growth = growth_without(STEADY)
    assert bytes_by(growth, -1.0) == 0
    assert bytes_by(growth, 0.0) == request_log_bytes("load-1", 1000, 100)
    assert bytes_by(growth, 9.5) == sum(
        request_log_bytes(f"load-{n}", 1000, 100) for n in range(1, 11)
    )


def test_the_demo_budget_passes_the_threshold_then_fills_on_time() -> None:
    duration = 180.0
    arrivals = generate(scaled_workload(duration))
    volume = plan_volume(arrivals, duration)
    growth = growth_without(arrivals)

    def share(t: float) -> float:
        return (volume.older_bytes + bytes_by(growth, t)) / volume.budget_bytes

    # Left alone, the server passes log-disk's 85% in the third act, after the tuned change,
    # and its budget a little later, within the run.
    at_threshold = share(THRESHOLD_AT_SHARE * duration)
    assert share(THRESHOLD_AT_SHARE * duration - 2) < 0.845
    assert at_threshold == pytest.approx(0.85, abs=1e-6)
    assert share(FULL_AT_SHARE * duration - 2) < 0.995
    assert share(FULL_AT_SHARE * duration) == pytest.approx(1.0, abs=1e-6)
    assert 0.3 < share(0.0) < 0.6  # older logs: a directory well used, not yet under pressure


def test_the_older_logs_are_written_to_their_size(tmp_path: Path) -> None:
    write_older_logs(tmp_path / "logs", LogVolume(budget_bytes=10**6, older_bytes=200_001))
    assert directory_bytes(tmp_path / "logs") == 200_001
    assert directory_bytes(tmp_path / "missing") is None


def test_the_act_sets_the_measured_directory_beside_the_one_left_alone() -> None:
    volume = LogVolume(budget_bytes=50_000, older_bytes=20_000)
    # Measured: grew until 10 s, then quiet (the change).
    measured = [(0.0, 20_000), (10.0, 40_000), (60.0, 40_500)]
    act = log_act(volume, STEADY, measured, end_s=60.0)
    assert act["with_governor"]["end_share"] == pytest.approx(0.81)
    without = act["without_governor"]
    written = bytes_by(growth_without(STEADY), 60.0)
    assert without["end_bytes"] == 20_000 + written
    assert without["end_share"] > 1.0
    line_bytes = request_log_bytes("load-1", 1000, 100)
    # Over the budget after about 30_000 / line_bytes arrivals, one a second.
    assert without["full_at_s"] == pytest.approx(30_000 / line_bytes, abs=1.5)
    assert without["curve"][0] == [0, 20_000 + line_bytes]
    [text] = log_lines(act)
    assert "held 0.0 MB (81% of it) with the governor" in text
    assert f"over its budget from 0:{without['full_at_s']:02.0f}" in text


def test_a_directory_never_full_without_the_governor_says_no_time() -> None:
    act = log_act(LogVolume(10**9, 0), STEADY, [(0.0, 10)], end_s=60.0)
    assert act["without_governor"]["full_at_s"] is None
    assert "over its budget" not in log_lines(act)[0]
    assert log_lines(None) == []
