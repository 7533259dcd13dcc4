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


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        (
            "not a Prometheus text page: \x1b[2J\x1b[31mOWNED",
            "not a Prometheus text page: ?[2J?[31mOWNED",
        ),
        ("line one\r\nline\ttwo\x00", "line one line two?"),
        ("right\u202eto left", "right?to left"),
        ("plain words, unchanged: é ü ✓", "plain words, unchanged: é ü ✓"),
    ],
)
def test_a_reason_from_outside_is_shown_as_plain_text(error: str, shown: str) -> None:
    # A page, an answer or a payload chooses the words of a failure; an ANSI escape in them
    # would restyle or clear the terminal of whoever runs `status` (issue 15, hostile suite).
    board = HealthBoard()
    board.failed("vllm/hostile", 1.0, error, "unparsable")
    health = board.get("vllm/hostile")
    assert health is not None
    assert health.last_error == shown


def test_a_reason_from_outside_is_bounded() -> None:
    board = HealthBoard()
    board.failed("vllm/hostile", 1.0, "x" * 100_000, "unparsable")
    health = board.get("vllm/hostile")
    assert health is not None
    assert len(health.last_error) <= 500
    assert health.last_error.endswith("…")
