"""A tune policy's round in the engine: off the loop, then the same planner as any intent (issue 16).

The store holds ten minutes of code-like traffic (long prompts, short outputs) as a daemon
scraping vLLM would have stored it; the tune policy asks for ``max_num_batched_tokens`` under
a 50 ms TPOT objective. The round runs in the real what-if worker process; the intent it
yields is planned against the real envelopes and knob histories and handed to the route (the
port the router fills in the daemon), with its counterfactual.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from daemon.core.settings import GovernorConfig
from daemon.engine.evaluation.policy_ledger import PolicyLedger
from daemon.engine.evaluation.tuner import OFF_LOOP, Tuner, WhatIfRunner
from daemon.engine.storage.state_store import StateStore
from daemon.policy.decisions import Decision, DecisionKind
from daemon.policy.evaluate import TargetView, evaluate
from daemon.policy.loading import parse_policy
from daemon.policy.planner import KnobHistory
from daemon.policy.spec import PolicySpec
from daemon.policy.state import Phase, PolicyState
from simulator.synthetic_workloads import GammaArrivals, LogNormalLengths, WorkloadSpec, generate
from tests.unit.whatif.metric_histories import INSTANCE, history

pytestmark = pytest.mark.asyncio

IN_FORCE = {"max_num_seqs": 256.0, "max_num_batched_tokens": 8192.0}
POLICY = """\
name: tpot-tune
when: tpot_p95_s > 0.05
action:
  tune: {knobs: [max_num_batched_tokens], tpot_slo: 50ms, min_gain: 10%}
"""

VETO = """\
name: gpu-veto
when: gpu_throttle_reasons_bitmask.exists(g, gpu_throttle_reasons_bitmask[g] > 0.0)
action:
  veto: [max_num_seqs, max_num_batched_tokens]
"""


@dataclass
class Clock:
    now: float = 600.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _config(tmp_path: Path, low: int = 2048) -> GovernorConfig:
    return GovernorConfig.model_validate(
        {
            "governor": {"state_dir": str(tmp_path)},
            "vllm": [
                {
                    "name": INSTANCE,
                    "url": "http://127.0.0.1:9",
                    "knobs": {
                        "max_num_batched_tokens": {
                            "min": low,
                            "max": 8192,
                            "max_step": 8192,
                            "min_dwell_s": 900,
                        }
                    },
                }
            ],
        }
    )


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[PolicyLedger]:
    store = StateStore(tmp_path / "state.sqlite3")
    yield PolicyLedger(store, Clock())
    store.close()


async def _no_reply(_policy: str, _target: str, _text: str) -> bool:
    return False


def _tuner(
    tmp_path: Path,
    ledger: PolicyLedger,
    routed: list[Decision],
    specs: tuple[PolicySpec, ...] = (),
    *,
    runner: WhatIfRunner = OFF_LOOP,
    in_force: dict[str, float] = IN_FORCE,
    low: int = 2048,
) -> Tuner:
    spec = WorkloadSpec(
        name="code-like",
        duration_s=600,
        arrivals=GammaArrivals(rate_rps=8.0),
        prompt_tokens=LogNormalLengths(median=4000, p90=8800, max=16000),
        output_tokens=LogNormalLengths(median=60, p90=150, max=1000),
    )
    config = _config(tmp_path, low)

    def route(accepted: Sequence[Decision]) -> list[Decision]:
        routed.extend(accepted)
        return []

    return Tuner(
        lambda: config,
        history(generate(spec), 600.0),
        Clock(),
        ledger,
        CollectorRegistry(),
        knobs=lambda: {INSTANCE: in_force},
        specs=lambda: specs,
        route=route,
        quarantine=lambda policy, target, why: None,
        tell=lambda decisions: None,
        reply=_no_reply,
        runner=runner,
    )


def _due(in_force: dict[str, float] = IN_FORCE) -> Decision:
    spec = parse_policy(POLICY, Path("tpot-tune.yaml"))
    view = TargetView(INSTANCE, {"tpot_p95_s": 0.15}, in_force)
    _, decisions = evaluate(spec, PolicyState(), view, 600.0, Clock().wall())
    (tune,) = [d for d in decisions if d.kind is DecisionKind.TUNE]
    return tune


async def test_a_round_off_the_loop_becomes_an_intent_routed_with_its_prediction(
    tmp_path: Path, ledger: PolicyLedger
) -> None:
    routed: list[Decision] = []
    tuner = _tuner(tmp_path, ledger, routed)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    beside = asyncio.create_task(ticker())
    try:
        recorded = await tuner.run_one(_due())
    finally:
        beside.cancel()
        await asyncio.gather(beside, return_exceptions=True)

    # The loop kept turning while the round ran: it ran in another process.
    assert ticks > 0
    (intent,) = routed
    assert recorded == [intent]
    assert intent.kind is DecisionKind.INTENT
    assert intent.intent is not None
    assert intent.intent.changes["max_num_batched_tokens"] < 8192
    assert set(intent.intent.changes) == {"max_num_batched_tokens"}
    assert intent.intent.risk == "approval"
    facts = intent.details["whatif"]
    assert facts["after"]["goodput_rps"] >= 1.1 * facts["now"]["goodput_rps"]
    assert facts["workload"]["rate_rps"] == pytest.approx(8.0, rel=0.15)
    stored = ledger.store.recent_decisions(5)
    assert stored[0]["kind"] == "intent"
    assert stored[0]["details"]["whatif"]["now"]["max_num_batched_tokens"] == 8192
    assert (("tpot-tune", INSTANCE)) in tuner.last_reports


async def test_the_tuned_intent_meets_the_same_dwell_as_any_change(
    tmp_path: Path, ledger: PolicyLedger
) -> None:
    routed: list[Decision] = []
    tuner = _tuner(tmp_path, ledger, routed)
    # Changed 700 s ago: longer than the round's window, shorter than the 900 s dwell.
    ledger.history[(INSTANCE, "max_num_batched_tokens")] = KnobHistory(-100.0, (-100.0,))

    recorded = await tuner.run_one(_due())

    assert routed == []
    (blocked,) = recorded
    assert blocked.kind is DecisionKind.BLOCKED
    assert blocked.guard == "dwell"


async def test_no_round_runs_while_the_targets_last_change_settles(
    tmp_path: Path, ledger: PolicyLedger
) -> None:
    routed: list[Decision] = []
    tuner = _tuner(tmp_path, ledger, routed)
    # Changed 100 s ago: the round's window would hold the setting before it too.
    ledger.history[(INSTANCE, "max_num_batched_tokens")] = KnobHistory(500.0, (500.0,))
    (blocked,) = await tuner.run_one(_due())
    assert (blocked.kind, blocked.guard) == (DecisionKind.BLOCKED, "unsettled")
    assert "changed 100 s ago" in blocked.details["reason"]
    assert tuner.last_reports == {}  # no round was run
    # A tuned change awaiting its measurement holds every round on its target.
    ledger.history.clear()
    (first,) = [d for d in await tuner.run_one(_due()) if d.kind is DecisionKind.INTENT]
    assert routed == [first]
    (second,) = await tuner.run_one(_due())
    assert (second.kind, second.guard) == (DecisionKind.BLOCKED, "unsettled")
    assert "awaits its measurement" in second.details["reason"]


async def test_a_firing_veto_blocks_a_tuned_raise_as_any_raise(
    tmp_path: Path, ledger: PolicyLedger
) -> None:
    # A 512-token budget under 8 req/s of 4,000-token prompts cannot keep up: the what-if
    # picks a larger one. While the pack's GPU veto fires, that raise is blocked (veto).
    veto = parse_policy(VETO, Path("gpu-veto.yaml"))
    ledger.states[("gpu-veto", INSTANCE)] = PolicyState(phase=Phase.FIRING, since=0.0)
    small = {"max_num_seqs": 256.0, "max_num_batched_tokens": 512.0}
    routed: list[Decision] = []
    tuner = _tuner(tmp_path, ledger, routed, (veto,), in_force=small, low=512)

    (blocked,) = await tuner.run_one(_due(small))

    assert routed == []
    assert blocked.kind is DecisionKind.BLOCKED
    assert blocked.guard == "veto"
    assert blocked.intent is not None
    assert blocked.intent.changes["max_num_batched_tokens"] > 512


async def test_too_little_data_is_a_failed_round_never_a_change(
    tmp_path: Path, ledger: PolicyLedger
) -> None:
    due = _due()
    empty = Tuner(
        lambda: _config(tmp_path),
        history([], 0.0),
        Clock(),
        ledger,
        CollectorRegistry(),
        knobs=lambda: {INSTANCE: IN_FORCE},
        specs=lambda: (),
        route=lambda accepted: [],
        quarantine=lambda policy, target, why: None,
        tell=lambda decisions: None,
        reply=_no_reply,
    )

    (failed,) = await empty.run_one(due)

    assert failed.kind is DecisionKind.BLOCKED
    assert failed.guard == "whatif_failed"
    assert failed.details["reason"]


async def test_explain_shows_the_last_round_or_runs_one_now(
    tmp_path: Path, ledger: PolicyLedger
) -> None:
    spec = parse_policy(POLICY, Path("tpot-tune.yaml"))
    routed: list[Decision] = []
    tuner = _tuner(tmp_path, ledger, routed, (spec,))
    before: dict[str, Any] = {"targets": {INSTANCE: {}}}
    await tuner.explained("tpot-tune", before, fresh=False)
    now: dict[str, Any] = {"targets": {INSTANCE: {}}}
    await tuner.explained("tpot-tune", now, fresh=True)
    other: dict[str, Any] = {"targets": {INSTANCE: {}}}
    await tuner.explained("no-such-policy", other, fresh=True)

    assert before["targets"][INSTANCE]["tune"]["report"] is None
    shown = now["targets"][INSTANCE]["tune"]
    assert shown["question"]["knobs"] == ["max_num_batched_tokens"]
    report = shown["report"]
    assert {c["max_num_batched_tokens"] for c in report["candidates"]} == {2048, 4096, 8192}
    assert report["pick"] is not None
    assert shown["counterfactual"]["after"]["goodput_rps"] > 0
    assert routed == []  # explaining proposes nothing
    assert other == {"targets": {INSTANCE: {}}}
