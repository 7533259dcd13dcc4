"""What a draining server refused, read from its own counters."""

from __future__ import annotations

from actuators.vllm.drain_watch import reading

PAGE = """\
process_start_time_seconds 1.7961373844e+09
http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 145.0
http_requests_total{handler="/v1/completions",method="POST",status="5xx"} 7.0
http_requests_total{handler="/v1/chat/completions",method="POST",status="5xx"} 2.0
http_requests_total{handler="/health",method="GET",status="2xx"} 30.0
"""


def test_every_5xx_answer_of_the_process_counts() -> None:
    found = reading(PAGE)
    assert found.process_start == 1.7961373844e09
    assert found.refused == 9.0


def test_a_page_without_the_counters_reads_zero_and_no_process() -> None:
    found = reading("vllm:num_requests_running 0\n")
    assert found.process_start is None
    assert found.refused == 0.0
