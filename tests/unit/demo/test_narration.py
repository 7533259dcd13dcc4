"""The demo's sentences (issue 19, finding 9): what the governor waits for, changes, answers."""

from __future__ import annotations

from daemon.app.demo.narration import (
    answer_line,
    change_line,
    clock,
    restart_cost,
    waiting_lines,
)

ORIGIN = 10_000.0


def policy(phase: str, **state: object) -> dict[str, object]:
    return {"name": "ttft-queue", "targets": {"main": {"phase": phase, **state}}}


def test_a_pending_policy_says_since_when_its_condition_holds_and_when_it_will_act() -> None:
    pending = policy("pending", since=ORIGIN + 35, fires_at=ORIGIN + 215, acts=True)
    [waiting] = waiting_lines([pending], ORIGIN, t=85.0)
    assert waiting.line == (
        "ttft-queue on main: its condition has held since 0:35; it will act at 3:35 "
        "(in 2 min 10 s) if it keeps holding"
    )
    assert waiting.key == ("ttft-queue", "main", "pending")


def test_a_policy_that_would_act_after_the_end_says_so_and_a_shadow_one_only_fires() -> None:
    later = policy("pending", since=ORIGIN + 308, fires_at=ORIGIN + 2108, acts=True)
    [waiting] = waiting_lines([later], ORIGIN, t=309.0, end=420.0)
    assert waiting.line == (
        "ttft-queue on main: its condition has held since 5:08; it would act at 35:08, "
        "after the demo has ended"
    )
    shadow = policy("pending", since=ORIGIN, fires_at=ORIGIN + 60, acts=False)
    [waiting] = waiting_lines([shadow], ORIGIN, t=30.0, end=420.0)
    assert "it will fire (recorded only, no change) at 1:00 (in 30 s)" in waiting.line


def test_a_cooling_policy_says_when_it_may_act_again_and_a_quiet_one_says_nothing() -> None:
    cooling = policy("firing", cooling_down_until=ORIGIN + 2000)
    [waiting] = waiting_lines([cooling], ORIGIN, t=300.0)
    assert waiting.line.endswith("cooling down, it will not act again before 33:20")
    assert waiting_lines([policy("ok"), policy("pending", fires_at=None)], ORIGIN, 1.0) == []


def test_a_change_in_flight_says_what_is_going_on_in_words() -> None:
    open_ = {"id": 1, "policy": "ttft-queue", "state": "open", "step": "restarting"}
    assert change_line(open_) == (
        "change #1 by ttft-queue: restarting the server: it finishes what it holds and "
        "refuses new requests"
    )
    done = {"id": 1, "policy": "ttft-queue", "state": "done", "outcome": "applied and verified"}
    assert change_line(done) == "change #1 by ttft-queue: done: applied and verified"


def test_an_answer_says_who_answered_and_what_happens_next_without_arrows() -> None:
    change = "ttft-queue on main: max_num_batched_tokens 256 -> 320"
    text = answer_line(change, action="approve", mode="terminal", accepted=True, reason="")
    assert text == f"you approved {change}; the governor applies it now"
    assert "-> approved" not in text
    denied = answer_line(change, action="reject", mode="deny", accepted=True, reason="")
    assert denied.startswith("rejected automatically (--approve deny)")
    refused = answer_line(change, action="approve", mode="auto", accepted=False, reason="expired")
    assert refused.endswith("but the governor did not take the answer: expired")


def test_the_restart_cost_counts_the_drain() -> None:
    assert restart_cost({"restart": 10.4, "ready": 3.2}) == (
        "the restart took 14 s without taking new requests (draining and stopping 10 s, "
        "loading 3 s)"
    )
    assert restart_cost({"write": 0.01}) is None
    # With a gate in front the governor drains it first: no new request reaches vLLM then.
    assert restart_cost({"drain": 4.0, "restart": 1.4, "ready": 3.5}) == (
        "the restart took 9 s without taking new requests (the gate drained 4 s, stopping 1 s, "
        "loading 4 s)"
    )


def test_clock_shows_the_time_before_the_workload_as_negative() -> None:
    assert (clock(-5.2), clock(0.4), clock(215.9)) == ("-0:05", "0:00", "3:35")
