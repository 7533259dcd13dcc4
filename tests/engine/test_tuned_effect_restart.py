"""A tuned change awaiting its measurement outlives a restart of the governor (issue 16).

The tuner kept the changes it awaited in memory only: a governor restarted (a crash, an
upgrade) before a change's window had passed never measured it, so its prediction error was
never recorded and a bad prediction never quarantined. They are kept in the state store now,
and the next governor resumes them with their wait started over: the time it was down was
watched by no one (its metrics were never scraped), so the window it measures lies wholly
after its start, as a policy's timers start over (``PolicyState.restarted``).

The stores and the tuner are the daemon's; only the measurement (a port, the what-if worker's)
answers a fixed miss, so that the test is about the wait, not the model (measured for real in
``test_tuned_effect.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from daemon.core.settings import GovernorConfig
from daemon.engine.evaluation.policy_ledger import PolicyLedger
from daemon.engine.evaluation.tuner import IN_PROCESS, Tuner, WhatIfRunner
from daemon.engine.storage.state_store import StateStore
from daemon.policy.decisions import Decision, DecisionKind, Evidence, Intent
from daemon.sources.store import SignalStore
from daemon.whatif.lognormal_fit import LogNormal
from daemon.whatif.realised import Realised, RealisedCheck
from daemon.whatif.summary import LengthSummary, WorkloadSummary

pytestmark = pytest.mark.asyncio

TARGET = "main"
PICK = {"max_num_batched_tokens": 2048.0}
WINDOW_S = 600.0
DOWNTIME_S = 45.0
EPOCH = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)


@dataclass
class Clock:
    """A process's loop clock (its own zero) and the wall clock it reads beside it."""

    now: float
    wall_at_zero: datetime

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return self.wall_at_zero + timedelta(seconds=self.now)


@dataclass
class Governor:
    """The parts of one governor process that await a tuned change."""

    tuner: Tuner
    ledger: PolicyLedger
    clock: Clock
    checks: list[RealisedCheck] = field(default_factory=list)
    quarantined: list[tuple[str, str, str]] = field(default_factory=list)


def _lengths(median: float, p90: float) -> LengthSummary:
    fit = LogNormal(math.log(median), math.log(p90 / median) / 1.2816)
    return LengthSummary(1000, fit.mean, median, p90, p90 * 1.5, fit, int(p90 * 2))


def _missed(check: RealisedCheck) -> Realised:
    """Half the requests within the SLO at the predicted rate: far below the 96% predicted."""
    workload = WorkloadSummary(
        instance=check.instance,
        window_s=check.window_s,
        scrapes=300,
        rate_rps=8.0,
        count_cv=0.25,
        arrival_cv=1.0,
        scrape_interval_s=2.0,
        prompt=_lengths(4000, 8800),
        output=_lengths(60, 150),
    )
    return Realised(workload, 0.7, 0.7, 0.5, (0.4, 0.7), 4.0)


def _start(path: Path, clock: Clock) -> Governor:
    config = GovernorConfig.model_validate(
        {"vllm": [{"name": TARGET, "url": "http://127.0.0.1:9"}]}
    )
    ledger = PolicyLedger(StateStore(path), clock)
    checks: list[RealisedCheck] = []
    quarantined: list[tuple[str, str, str]] = []

    async def measure(check: RealisedCheck) -> Realised:
        checks.append(check)
        return _missed(check)

    async def reply(policy: str, target: str, text: str) -> bool:
        return True

    tuner = Tuner(
        lambda: config,
        SignalStore(),
        clock,
        ledger,
        CollectorRegistry(),
        knobs=lambda: {TARGET: PICK},
        specs=lambda: (),
        route=lambda accepted: [],
        quarantine=lambda policy, target, why: quarantined.append((policy, target, why)),
        tell=lambda decisions: None,
        reply=reply,
        runner=WhatIfRunner(IN_PROCESS.plan_round, measure),
    )
    return Governor(tuner, ledger, clock, checks, quarantined)


def _tuned() -> Decision:
    whatif = {
        "objective": "goodput",
        "predicted_gain": 0.5,
        "now": {"slo_attainment": 0.62, "goodput_rps": 4.9},
        "after": {"slo_attainment": 0.96, "goodput_rps": 7.7},
        "restart": {"downtime_s": DOWNTIME_S, "requests_lost": 360.0},
        "workload": {
            "window_s": WINDOW_S,
            "rate_rps": 8.0,
            "prompt_tokens": {"p50": 4000, "p90": 8800, "p99": 13200},
            "output_tokens": {"p50": 60, "p90": 150, "p99": 225},
        },
        "profile": "llama-3.1-8b-h100-tp1",
        "slo": {"ttft_s": 2.0, "tpot_s": 0.05},
        "max_error": 0.30,
    }
    return Decision(
        policy="tpot-tune",
        target=TARGET,
        at=0.0,
        kind=DecisionKind.INTENT,
        evidence=Evidence("tpot_p95_s > 0.05", {"tpot_p95_s": 0.15}, 120.0),
        intent=Intent(PICK, {"max_num_batched_tokens": 8192.0}, None, "approval"),
        details={"whatif": whatif},
    )


async def test_a_restarted_governor_measures_the_change_over_a_window_it_watched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.sqlite3"
    first = _start(path, Clock(0.0, EPOCH))
    first.tuner.resume_effects()
    first.tuner.expect_effect(_tuned())
    first.clock.now = 10.0
    assert await first.tuner.check_effects() == []  # in force: its wait starts here
    first.clock.now = 300.0  # half-way through the window, the governor stops
    first.ledger.store.close()

    # An hour later a new process starts, with its own loop clock.
    started = 50.0
    second = _start(path, Clock(started, EPOCH + timedelta(seconds=3600 + 300 - started)))
    second.tuner.resume_effects()
    # At the first look it is in force again; the hour unwatched counts toward nothing.
    assert await second.tuner.check_effects() == []
    second.clock.now = started + DOWNTIME_S + WINDOW_S - 1.0
    assert await second.tuner.check_effects() == []
    assert second.checks == []
    second.clock.now = started + DOWNTIME_S + WINDOW_S

    (realised,) = await second.tuner.check_effects()

    [check] = second.checks
    assert check.now - check.window_s >= started, "the window lies after the restart"
    assert realised.kind is DecisionKind.REALISED
    assert realised.details["goodput_error"] < -0.30
    [(policy, target, why)] = second.quarantined
    assert (policy, target) == ("tpot-tune", TARGET)
    assert why.startswith("its prediction missed")
    second.ledger.store.close()

    # Measured once: a third start awaits nothing.
    third = _start(path, Clock(0.0, EPOCH + timedelta(hours=3)))
    third.tuner.resume_effects()
    third.clock.now = 10_000.0
    assert await third.tuner.check_effects() == []
    assert third.checks == []
    third.ledger.store.close()
