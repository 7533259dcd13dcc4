"""Online signals: the governor's own batch traffic taken out of vLLM's counts."""

from __future__ import annotations

import json

from daemon.batch.own_traffic import OwnTraffic, TrafficTally, usage_of
from daemon.engine.batches.lanes import BatchLanes
from daemon.policy.online_signals import online_signals


def test_batch_requests_in_flight_are_taken_out_of_waiting_first_then_running() -> None:
    raw = {"running": 6.0, "waiting": 1.0, "kv_usage": 0.4, "ttft_p95_s": 0.3}
    online = online_signals(raw, OwnTraffic(4, 0.0, 0.0, 0.0))
    assert (online["waiting"], online["running"]) == (0.0, 3.0)
    assert online["batch_in_flight"] == 4.0
    # What cannot be separated is left as vLLM says it.
    assert (online["kv_usage"], online["ttft_p95_s"]) == (0.4, 0.3)
    # Never below zero (a scrape older than the lane's count).
    assert online_signals({"running": 2.0, "waiting": 0.0}, OwnTraffic(5, 0, 0, 0))["running"] == 0


def test_token_rates_lose_the_batch_answers_tokens_and_no_data_stays_no_data() -> None:
    raw = {"gen_tokens_per_s": 900.0, "prompt_tokens_per_s": 100.0}
    online = online_signals(raw, OwnTraffic(0, 2.0, 150.0, 700.0))
    assert (online["gen_tokens_per_s"], online["prompt_tokens_per_s"]) == (200.0, 0.0)
    assert (online["batch_requests_per_s"], online["batch_gen_tokens_per_s"]) == (2.0, 700.0)
    assert "running" not in online_signals({}, OwnTraffic(3, 0, 0, 0))


def test_the_tally_counts_the_answers_inside_the_window() -> None:
    tally = TrafficTally()
    for at in (1.0, 5.0, 9.0, 10.0):
        tally.answered(at, (10, 100))
    traffic = tally.over(5.0, 10.0, in_flight=2)
    assert traffic == OwnTraffic(2, 2 / 5.0, 20 / 5.0, 200 / 5.0)  # (5, 10]: 9 and 10


def test_usage_is_read_from_a_result_line() -> None:
    line = {
        "response": {
            "status_code": 200,
            "body": {"usage": {"prompt_tokens": 7, "completion_tokens": 24}},
        }
    }
    assert usage_of(json.dumps(line).encode()) == (7, 24)
    assert usage_of(json.dumps({"response": None, "error": {"code": "x"}}).encode()) is None
    assert usage_of(b"not json") is None


def test_the_lanes_piece_size_is_a_signal_and_follows_the_configuration() -> None:
    configured = [256]
    lanes = BatchLanes(lambda: configured[0])
    traffic = lanes.lane("main").traffic(60.0, 100.0)
    assert online_signals({}, traffic)["batch_piece_tokens"] == 256.0
    configured[0] = 0  # a reload turned the pieces off
    assert online_signals({}, lanes.lane("main").traffic(60.0, 100.0))["batch_piece_tokens"] == 0.0
