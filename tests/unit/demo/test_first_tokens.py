"""First tokens within the TTFT SLO, from vLLM's histogram (issue 19, findings 9 and 10)."""

from __future__ import annotations

import pytest

from daemon.app.demo.first_tokens import (
    FirstTokens,
    attainment_lines,
    read_first_tokens,
    share_within,
)

PAGE = """\
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 10.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 40.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="2.5",model_name="m"} 70.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 100.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 100.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 150.0
"""


def test_the_slo_inside_a_bucket_is_interpolated_as_prometheus_does() -> None:
    counts = read_first_tokens(PAGE, "p1", slo_s=2.0)
    # 40 up to 1 s, and two thirds of the 30 between 1 s and 2.5 s.
    assert counts is not None
    assert counts.total == 100.0
    assert counts.within == pytest.approx(60.0)
    assert read_first_tokens(PAGE, "p1", slo_s=1.0) == FirstTokens("p1", 100.0, 40.0)
    assert read_first_tokens("# nothing here\n", "p1", slo_s=2.0) is None


def test_a_window_counts_each_process_from_zero_and_never_across_a_restart() -> None:
    series = [
        (0.0, FirstTokens("a", 0, 0)),
        (10.0, FirstTokens("a", 100, 50)),
        (20.0, FirstTokens("a", 200, 90)),  # 100 more, 40 within
        (25.0, None),  # down: restarting
        (30.0, FirstTokens("b", 10, 10)),  # the new process starts from zero
    ]
    assert share_within(series, 10.0, 30.0) == pytest.approx((40 + 10) / (100 + 10))
    assert share_within(series, 20.0, 25.0) is None


def test_the_live_lines_give_the_last_window_and_each_process_before_and_after() -> None:
    series = [
        (-2.0, 256, FirstTokens("a", 0, 0)),
        (100.0, 256, FirstTokens("a", 1000, 600)),
        (120.0, None, None),
        (130.0, 320, FirstTokens("b", 0, 0)),
        (160.0, 320, FirstTokens("b", 300, 270)),
    ]
    lines = attainment_lines(series, 160.0, slo_s=2.0, option="max-num-batched-tokens")
    assert lines == [
        "first tokens within 2 s over the last 30 s: 90%",
        "with max-num-batched-tokens 256 (until 1:40): 60% of 1,000 first tokens within 2 s",
        "with max-num-batched-tokens 320 (since 2:10): 90% of 300 first tokens within 2 s",
    ]


def test_the_first_process_serves_since_the_start_not_since_a_negative_time() -> None:
    series = [(-2.0, 256, FirstTokens("a", 0, 0)), (60.0, 256, FirstTokens("a", 100, 70))]
    lines = attainment_lines(series, 60.0, slo_s=2.0, option="max-num-batched-tokens")
    assert lines[-1] == (
        "with max-num-batched-tokens 256 (since the start): 70% of 100 first tokens within 2 s"
    )
