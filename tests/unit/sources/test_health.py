from __future__ import annotations

import logging

import pytest

from daemon.sources.health import HealthBoard, SourceState


def test_each_state_change_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="daemon.sources.health")
    board = HealthBoard()
    board.register("vllm/main", 0.0)
    for now in range(1, 50):
        board.failed("vllm/main", float(now), "connection refused", "starting")
    board.failed("vllm/main", 50.0, "HTTP 503", "unhealthy")
    for now in range(51, 100):
        board.succeeded("vllm/main", float(now))
    messages = [(r.getMessage(), getattr(r, "detail", "")) for r in caplog.records]
    assert messages == [
        ("source down", "starting"),
        ("source down", "unhealthy"),
        ("source up", ""),
    ]
    health = board.get("vllm/main")
    assert health is not None
    assert (health.state, health.since, health.last_success) == (SourceState.UP, 51.0, 99.0)


def test_failure_keeps_the_last_success_time() -> None:
    board = HealthBoard()
    board.register("nvml", 0.0)
    board.succeeded("nvml", 1.0)
    board.failed("nvml", 2.0, "driver gone")
    health = board.get("nvml")
    assert health is not None
    assert (health.state, health.last_success, health.last_error) == (
        SourceState.DOWN,
        1.0,
        "driver gone",
    )
