"""After a tuned change, its realised effect is measured and a bad miss quarantines (issue 16).

The prediction is a real round's (code-like traffic, a 50 ms TPOT objective, the 8B profile:
lower ``max_num_batched_tokens`` to 2048). The server after the change is the simulated engine
scraped as the daemon scrapes vLLM (page text, the vLLM source's parser, the store), serving
the true workload, which the round only knew through its summary. Served as predicted, the
error is small and nothing happens but the record; served by an engine that (unknown to the
model) still steps like the old setting, the policy that proposed the change is quarantined on
the target, and says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from daemon.core.settings import GovernorConfig
from daemon.engine.evaluation.policy_ledger import PolicyLedger
from daemon.engine.evaluation.tuner import Tuner
from daemon.engine.storage.state_store import StateStore
from daemon.policy.decisions import Decision, DecisionKind, Evidence, Intent
from daemon.sources.store import SignalStore
from daemon.whatif.candidates import Setting
from daemon.whatif.lognormal_fit import LogNormal
from daemon.whatif.planning import PlanRequest, plan
from daemon.whatif.prediction import Slo
from daemon.whatif.summary import LengthSummary, WorkloadSummary
from daemon.whatif.tuning import tuned_decision
from simulator.profiles import load_profile
from simulator.settings import EngineSettings
from simulator.synthetic_workloads import (
    Z90,
    GammaArrivals,
    LogNormalLengths,
    WorkloadSpec,
    generate,
)
from tests.unit.whatif.scraped_runs import INSTANCE, scraped_store

pytestmark = pytest.mark.asyncio

PROFILE = "llama-3.1-8b-h100-tp1"
SERVED_S = 720.0
PICK = {"max_num_seqs": 1024.0, "max_num_batched_tokens": 2048.0}


@dataclass
class Clock:
    now: float = 0.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return datetime(2026, 12, 2, 1, 0, tzinfo=UTC)


def _lengths(median: float, p90: float, top: int) -> LengthSummary:
    fit = LogNormal(math.log(median), math.log(p90 / median) / Z90)
    return LengthSummary(1000, fit.mean, median, p90, p90 * 1.5, fit, top)


def _tuned(max_error: float) -> Decision:
    summary = WorkloadSummary(
        instance=INSTANCE,
        window_s=600,
        scrapes=300,
        rate_rps=8.0,
        count_cv=0.25,
        arrival_cv=1.0,
        scrape_interval_s=2.0,
        prompt=_lengths(4000, 8800, top=16_000),
        output=_lengths(60, 150, top=4_000),
    )
    current = Setting(1024, 8192)
    report = plan(
        PlanRequest(
            summary=summary,
            profile=PROFILE,
            current=current,
            candidates=(current, Setting(1024, 2048)),
            slo=Slo(ttft_s=2.0, tpot_s=0.050),
            simulated_s=300,
            min_gain=0.10,
        )
    )
    due = Decision(
        policy="tpot-tune",
        target=INSTANCE,
        at=0.0,
        kind=DecisionKind.TUNE,
        evidence=Evidence("tpot_p95_s > 0.05", {"tpot_p95_s": 0.15}, 120.0),
        intent=Intent({}, {"max_num_batched_tokens": 8192.0}, None, "approval"),
        details={"tune": {"max_error": max_error}},
    )
    tuned = tuned_decision(due, report)
    assert tuned.kind is DecisionKind.INTENT
    assert tuned.intent is not None
    assert tuned.intent.changes == {"max_num_batched_tokens": 2048.0}
    return tuned


def _served_by(tokens: int) -> SignalStore:
    """The true workload (seed 3) served by an engine stepping with ``tokens`` per step."""
    profile = load_profile(PROFILE)
    settings = EngineSettings.defaults(profile, max_num_batched_tokens=tokens)
    spec = WorkloadSpec(
        name="code-like",
        duration_s=SERVED_S,
        seed=3,
        arrivals=GammaArrivals(rate_rps=8.0, cv=1.0),
        prompt_tokens=LogNormalLengths(median=4000, p90=8800, max=16000),
        output_tokens=LogNormalLengths(median=60, p90=150, max=4000),
    )
    return scraped_store(profile, settings, generate(spec), SERVED_S)


@dataclass
class Rig:
    tuner: Tuner
    clock: Clock
    quarantined: list[tuple[str, str, str]]
    told: list[Decision]
    replies: list[tuple[str, str, str]]
    ledger: PolicyLedger


def _rig(tmp_path: Path, store: SignalStore) -> Rig:
    config = GovernorConfig.model_validate(
        {"vllm": [{"name": INSTANCE, "url": "http://127.0.0.1:9"}]}
    )
    clock = Clock()
    quarantined: list[tuple[str, str, str]] = []
    told: list[Decision] = []
    ledger = PolicyLedger(StateStore(tmp_path / "state.sqlite3"), clock)

    replies: list[tuple[str, str, str]] = []

    def tell(decisions: Sequence[Decision]) -> None:
        told.extend(decisions)

    async def reply(policy: str, target: str, text: str) -> bool:
        replies.append((policy, target, text))
        return True

    tuner = Tuner(
        lambda: config,
        store,
        clock,
        ledger,
        CollectorRegistry(),
        knobs=lambda: {INSTANCE: PICK},
        specs=lambda: (),
        route=lambda accepted: [],
        quarantine=lambda policy, target, why: quarantined.append((policy, target, why)),
        tell=tell,
        reply=reply,
    )
    return Rig(tuner, clock, quarantined, told, replies, ledger)


async def _measured(rig: Rig, tuned: Decision) -> Decision:
    rig.tuner.expect_effect(tuned)
    assert await rig.tuner.check_effects() == []  # in force from now: the window starts
    rig.clock.now = SERVED_S - 1.0  # the restart waited out, then more than the window
    (realised,) = await rig.tuner.check_effects()
    assert await rig.tuner.check_effects() == []  # measured once
    rig.ledger.store.close()
    return realised


async def test_a_change_served_as_predicted_is_recorded_with_a_small_error(
    tmp_path: Path,
) -> None:
    rig = _rig(tmp_path, _served_by(2048))

    realised = await _measured(rig, _tuned(max_error=0.30))

    assert realised.kind is DecisionKind.REALISED
    details = realised.details
    assert details["comparable"]
    assert abs(details["goodput_error"]) < 0.15
    assert not details["quarantined"]
    assert rig.quarantined == []
    assert details["realised"]["rate_rps"] == pytest.approx(8.0, rel=0.2)
    assert rig.told == [realised]
    assert "goodput error +" in details["text"] or "goodput error -" in details["text"]
    assert details["channels"] == ["mqtt"]
    assert rig.replies == [("tpot-tune", INSTANCE, details["text"])]


async def test_a_prediction_that_misses_badly_quarantines_the_policy_and_says_why(
    tmp_path: Path,
) -> None:
    rig = _rig(tmp_path, _served_by(8192))

    realised = await _measured(rig, _tuned(max_error=0.10))

    details = realised.details
    assert details["comparable"]
    assert details["goodput_error"] < -0.10
    assert details["quarantined"]
    [(policy, target, why)] = rig.quarantined
    assert (policy, target) == ("tpot-tune", INSTANCE)
    assert why.startswith("its prediction missed: goodput error -")
    assert "beyond the 10% allowed" in why
    assert "is quarantined on main" in details["text"]
