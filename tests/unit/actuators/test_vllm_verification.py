from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from actuators.vllm import verification
from actuators.vllm.probes import Probe
from actuators.vllm.verification import judge
from daemon.api import VllmInstance

SERVER = VllmInstance(
    name="main",
    url="http://127.0.0.1:8000",
    verify_max_error_rate_increase=0.1,
    verify_max_ttft_p95_ratio=1.5,
    verify_max_preemption_rate_increase=0.5,
)


@pytest.mark.parametrize(
    ("before", "after", "ok", "worse"),
    [
        ({"ttft_p95_s": 1.0}, {"ttft_p95_s": 1.4}, True, []),
        ({"ttft_p95_s": 1.0}, {"ttft_p95_s": 1.6}, False, ["ttft_p95_s"]),
        ({"errors_per_s": 0.0}, {"errors_per_s": 0.2}, False, ["errors_per_s"]),
        ({"preemptions_per_s": 1.0}, {"preemptions_per_s": 1.4}, True, []),
        ({"preemptions_per_s": 0.0}, {"preemptions_per_s": 0.6}, False, ["preemptions_per_s"]),
        # No data on one side is not evidence of worse: an idle server keeps its change.
        ({}, {"ttft_p95_s": 9.0}, True, []),
        ({"ttft_p95_s": 1.0}, {}, True, []),
    ],
)
def test_conditions_compare_the_window_after_with_the_window_before(
    before: dict[str, float], after: dict[str, float], ok: bool, worse: list[str]
) -> None:
    verdict = judge(before, after, SERVER)
    assert verdict.ok is ok
    assert [check.signal for check in verdict.checks if check.verdict == "worse"] == worse
    assert len(verdict.checks) == 3


# An 8B server behind a gate raised from 32 to 128 sequences (bench.proof_tune's misconfigured
# start): vLLM's own TTFT p95 grows as it takes in what waited at the gate, whose refusals stop.
GATED_BEFORE = {
    "ttft_p95_s": 0.085,
    "errors_per_s": 0.0,
    "gate_queue_time_s": 1.1,
    "gate_refusals_per_s": 4.2,
}
GATED_AFTER = {
    "ttft_p95_s": 0.235,
    "errors_per_s": 0.0,
    "gate_queue_time_s": 0.0,
    "gate_refusals_per_s": 0.0,
}


def test_behind_a_gate_the_ttft_its_clients_saw_is_compared() -> None:
    verdict = judge(GATED_BEFORE, GATED_AFTER, SERVER)
    assert verdict.ok, verdict.detail
    compared = {check.signal: (check.before, check.after) for check in verdict.checks}
    assert compared["ttft_p95_s"] == pytest.approx((1.185, 0.235))
    # The other way round (a change that sends clients back to wait at the gate) is worse.
    assert [
        c.signal for c in judge(GATED_AFTER, GATED_BEFORE, SERVER).checks if c.verdict == "worse"
    ] == ["ttft_p95_s"]
    # The gate's 503s follow the demand, which differs between the windows: not errors.
    busier = {**GATED_AFTER, "gate_refusals_per_s": 0.8}
    assert judge({**GATED_AFTER, "gate_refusals_per_s": 0.44}, busier, SERVER).ok
    assert compared["errors_per_s"] == (0.0, 0.0)


def test_a_gate_wait_missing_on_one_side_leaves_vllms_own_ttft() -> None:
    after = {name: value for name, value in GATED_AFTER.items() if name != "gate_queue_time_s"}
    verdict = judge(GATED_BEFORE, after, SERVER)
    compared = {check.signal: (check.before, check.after) for check in verdict.checks}
    assert compared["ttft_p95_s"] == (0.085, 0.235)


class Windows:
    def __init__(self, answers: list[dict[str, float | None]]) -> None:
        self.answers = answers

    def measure(self, target: str, window_s: float) -> dict[str, float | None]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class LoopClock:
    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    def wall(self) -> datetime:
        return datetime.now(UTC)


@pytest.mark.asyncio
async def test_a_window_without_fresh_signals_is_waited_for_then_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def serving(url: str, timeout_s: float) -> Probe:
        return Probe("ready", 1.0)

    monkeypatch.setattr(verification, "probe", serving)
    monkeypatch.setattr(verification, "SOURCE_CATCH_UP_S", 0.5)
    server = SERVER.model_copy(update={"verify_window_s": 0.3, "scrape_interval_s": 0.1})
    # The source comes back late: the first measures have no data, then it does.
    late = Windows([{}, {}, {"errors_per_s": 0.0, "preemptions_per_s": 0.0}])
    verdict = await verification.verify(server, late, LoopClock(), {}, 1.0)
    assert verdict.ok, verdict
    never = await verification.verify(server, Windows([{}]), LoopClock(), {}, 1.0)
    assert not never.ok
    assert "not verified" in never.detail


@pytest.mark.parametrize(
    ("answers", "ok"),
    [
        # A freshly started server on a busy host may answer a probe late: not a failure...
        (["ready", "error", "error", "ready"], True),
        # ...but three late probes in a row are, and so is one refusal.
        (["ready", "error", "error", "error"], False),
        (["ready", "refused"], False),
        (["unhealthy"], False),
    ],
)
@pytest.mark.asyncio
async def test_only_a_server_that_stops_answering_fails_the_verification(
    monkeypatch: pytest.MonkeyPatch, answers: list[str], ok: bool
) -> None:
    left = list(answers)

    async def answering(url: str, timeout_s: float) -> Probe:
        state = left.pop(0) if left else "ready"
        return Probe(state, 1.0 if state == "ready" else None, detail=state)

    monkeypatch.setattr(verification, "probe", answering)
    # A window of ten probes: every scripted answer is heard before it ends.
    server = SERVER.model_copy(update={"verify_window_s": 1.0, "scrape_interval_s": 0.1})
    quiet = Windows([{"errors_per_s": 0.0, "preemptions_per_s": 0.0}])
    verdict = await verification.verify(server, quiet, LoopClock(), {}, 1.0)
    assert verdict.ok is ok, verdict
    if not ok:
        assert "stopped serving" in verdict.detail
