"""`vllm-governor status` shows the batch lanes a policy steers or that carry requests."""

from __future__ import annotations

from daemon.app.commands.status import lane_lines


def test_steered_or_busy_lanes_are_shown_idle_ones_are_not() -> None:
    status = {
        "batch_lanes": {
            "main": {
                "width": 4,
                "in_flight": 3,
                "policy": "night-batch",
                "priority": 1000,
                "reason": "night-batch: current + 2.0 = 4",
            },
            "side": {"width": 8, "in_flight": 0, "policy": None, "priority": None, "reason": "x"},
            "shut": {
                "width": 0,
                "in_flight": 0,
                "policy": "hands-off",
                "priority": None,
                "reason": "hands-off fires: the lane is closed",
            },
        }
    }
    assert lane_lines(status) == [
        "batch lanes:",
        "  main       4 wide, 3 in flight, priority 1000: night-batch: current + 2.0 = 4",
        "  shut       closed, 0 in flight, no priority: hands-off fires: the lane is closed",
    ]
    assert lane_lines({}) == []
