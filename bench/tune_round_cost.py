"""What a tune policy's planning round costs, and whether the fast loop feels it (issue 16).

One round as the daemon runs it: :meth:`daemon.engine.evaluation.tuner.Tuner.run_one` on a
``tune`` decision, with ten minutes of code-like traffic in the signal store (long prompts,
short outputs; the 8B profile at vLLM's defaults, envelopes as ``docs/whatif.md``'s). The round
copies the series on the loop and simulates every candidate in the what-if worker process.

Beside it, on the same event loop, the governor's real admission loop
(:class:`daemon.engine.actuation.admission_loop.AdmissionLoop`, a firing ``slo-band`` policy
on a gate in memory) ticks every 100 ms (its production period is 500 ms; shorter gives more
samples). A tick's gap is how much later than due it started. The same ticker runs for as long
with nothing else to do; the bench reports both and their ratio (p50, p99, max), the round's
CPU seconds (the worker's, from ``RUSAGE_CHILDREN``, and the planner's own count), its wall
time, and the milliseconds the loop spent copying the series; then the gaps of every round
pooled, against the idle ones pooled (one round's hundred ticks make a noisy p99 on a shared
machine), with the machine's load average.

    .venv/bin/python -m bench.tune_round_cost [--rounds N] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from actuators.haproxy.actuator import HaproxyActuator
from daemon.core.settings import GovernorConfig
from daemon.engine.actuation.admission_loop import AdmissionLoop
from daemon.engine.evaluation.policy_ledger import PolicyLedger
from daemon.engine.evaluation.tuner import Tuner
from daemon.engine.storage.cap_journal import SqliteCapJournal
from daemon.engine.storage.journal_store import SqliteJournal
from daemon.engine.storage.state_store import StateStore
from daemon.policy.decisions import Decision, DecisionKind
from daemon.policy.evaluate import TargetView, evaluate
from daemon.policy.loading import parse_policy
from daemon.policy.state import Phase, PolicyState
from daemon.sources.view import OK, SignalRow
from daemon.whatif.series_snapshot import snapshot
from simulator.profiles import load_profile
from simulator.settings import EngineSettings
from simulator.synthetic_workloads import GammaArrivals, LogNormalLengths, WorkloadSpec, generate
from tests.unit.whatif.scraped_runs import INSTANCE, scraped_store

ROOT = Path(__file__).resolve().parents[1]
PROFILE = "llama-3.1-8b-h100-tp1"
SERVED_S = 900.0
TICK_S = 0.1
IN_FORCE = {"max_num_seqs": 1024.0, "max_num_batched_tokens": 8192.0}
TUNE_POLICY = """\
name: tpot-tune
when: tpot_p95_s > 0.05
action:
  tune: {tpot_slo: 50ms, min_gain: 10%}
"""
GATE_ROWS = {"gate_cap": 64.0, "gate_in_flight": 60.0, "gate_queue": 20.0}
# The admission controllers read each request's TPOT (request_tpot_p95_s).
VLLM_ROWS = {
    "ttft_p95_s": 3.0,
    "tpot_p95_s": 0.03,
    "request_tpot_p95_s": 0.03,
    "preemptions_per_s": 0.0,
    "ttft_p50_s": 1.0,
}


@dataclass
class Clock:
    """The loop's own clock, as the daemon's: durations from the loop, a fixed calendar."""

    def monotonic(self) -> float:
        return SERVED_S + time.monotonic() - _START

    def wall(self) -> datetime:
        return datetime(2026, 12, 2, 0, 0, tzinfo=UTC)


_START = time.monotonic()


@dataclass
class MemoryGate:
    """A gate in memory: the loop's actuator reads and writes its cap here."""

    cap: int = 64
    writes: list[int] = field(default_factory=list)

    @property
    def where(self) -> str:
        return "memory vllm/main"

    async def read_cap(self) -> int | None:
        return self.cap

    async def write_cap(self, cap: int) -> int | None:
        self.writes.append(cap)
        self.cap = cap
        return cap


def _config() -> GovernorConfig:
    return GovernorConfig.model_validate(
        {
            "vllm": [
                {
                    "name": INSTANCE,
                    "url": "http://127.0.0.1:1",
                    "gate": {"enabled": True},
                    "knobs": {
                        "max_num_seqs": {"min": 16, "max": 1024, "max_step": 1024},
                        "max_num_batched_tokens": {"min": 512, "max": 8192, "max_step": 8192},
                    },
                }
            ]
        }
    )


def _rows(_window_s: float, only: frozenset[str]) -> Sequence[SignalRow]:
    values = {**GATE_ROWS, **VLLM_ROWS}
    return [
        SignalRow(name, INSTANCE, {}, value, "bench", 0.0, OK)
        for name, value in values.items()
        if name in only
    ]


async def _no_reply(_policy: str, _target: str, _text: str) -> bool:
    """No Slack here: the realised effect is never measured in this bench."""
    return False


async def _ticking(admission: AdmissionLoop, work: Awaitable[Any]) -> tuple[list[float], Any]:
    """Tick the admission loop every ``TICK_S`` until ``work`` ends; each tick's lateness."""
    loop = asyncio.get_running_loop()
    gaps: list[float] = []

    async def tick() -> None:
        due = loop.time()
        while True:
            gaps.append(loop.time() - due)
            await admission.tick_once()
            due += TICK_S
            await asyncio.sleep(max(0.0, due - loop.time()))

    ticker = asyncio.create_task(tick())
    try:
        result = await work
    finally:
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)
    return gaps, result


def _stats(gaps: list[float]) -> dict[str, float]:
    ordered = sorted(gaps)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {
        "ticks": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(p99 * 1000, 3),
        "max_ms": round(ordered[-1] * 1000, 3),
    }


async def _measure(rounds: int, state_dir: Path) -> dict[str, Any]:
    profile = load_profile(PROFILE)
    settings = EngineSettings.defaults(profile)
    spec = WorkloadSpec(
        name="code-like",
        duration_s=SERVED_S,
        seed=1,
        arrivals=GammaArrivals(rate_rps=8.0, cv=1.0),
        prompt_tokens=LogNormalLengths(median=4000, p90=8800, max=16000),
        output_tokens=LogNormalLengths(median=60, p90=150, max=4000),
    )
    store = scraped_store(profile, settings, generate(spec), SERVED_S)
    config = _config()
    clock = Clock()
    journal = SqliteCapJournal(state_dir / "gate.sqlite3", clock)
    changes = SqliteJournal(state_dir / "gate.sqlite3", clock)
    gate = MemoryGate()
    admission_policy = ROOT / "policies" / "admission-cap.yaml"
    specs = [parse_policy(admission_policy.read_text(), admission_policy)]
    states = {("admission-cap", INSTANCE): PolicyState(Phase.FIRING, 0.0)}
    admission = AdmissionLoop(
        config=lambda: config,
        specs=lambda: specs,
        states=lambda: states,
        rows=_rows,
        knobs=lambda: {INSTANCE: {"max_num_seqs": 64.0}},
        gates={INSTANCE: gate.where},
        actuator=HaproxyActuator(
            journal, clock, state_dir, gates=lambda _instance: gate, changes=changes
        ),
        clock=clock,
        registry=CollectorRegistry(),
    )
    state_store = StateStore(state_dir / "state.sqlite3")
    ledger = PolicyLedger(state_store, clock)
    routed: list[Decision] = []

    def route(accepted: Sequence[Decision]) -> list[Decision]:
        routed.extend(accepted)
        return []

    tuner = Tuner(
        lambda: config,
        store,
        clock,
        ledger,
        CollectorRegistry(),
        knobs=lambda: {INSTANCE: IN_FORCE},
        specs=lambda: (),
        route=route,
        quarantine=lambda policy, target, why: None,
        tell=lambda decisions: None,
        reply=_no_reply,
    )
    tune = parse_policy(TUNE_POLICY, Path("tpot-tune.yaml"))
    view = TargetView(INSTANCE, {"tpot_p95_s": 0.15}, IN_FORCE)
    _, decisions = evaluate(tune, PolicyState(), view, clock.monotonic(), clock.wall())
    (due,) = [d for d in decisions if d.kind is DecisionKind.TUNE]

    results: list[dict[str, Any]] = []
    cpu_s: list[float] = []
    wall_s: list[float] = []
    all_idle: list[float] = []
    all_busy: list[float] = []
    try:
        for _ in range(rounds):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.monotonic()
            busy, recorded = await _ticking(admission, tuner.run_one(due))
            wall = time.monotonic() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            idle, _ = await _ticking(admission, asyncio.sleep(wall))
            report = tuner.last_reports[("tpot-tune", INSTANCE)][1]
            cpu_s.append((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime))
            wall_s.append(wall)
            all_idle.extend(idle)
            all_busy.extend(busy)
            busy_stats, idle_stats = _stats(busy), _stats(idle)
            results.append(
                {
                    "outcome": [(d.kind.value, d.guard, d.details.get("reason")) for d in recorded],
                    "candidates": len(report.ranked),
                    "pick": None if report.pick is None else report.pick.label(),
                    "round_wall_s": round(wall, 2),
                    "round_cpu_s_worker": round(
                        (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 2
                    ),
                    "round_cpu_s_planner": round(report.cpu_s, 2),
                    "tick_gap_idle": idle_stats,
                    "tick_gap_round": busy_stats,
                    "ratio_p50": round(busy_stats["p50_ms"] / max(idle_stats["p50_ms"], 1e-3), 2),
                    "ratio_p99": round(busy_stats["p99_ms"] / max(idle_stats["p99_ms"], 1e-3), 2),
                    "ratio_max": round(busy_stats["max_ms"] / max(idle_stats["max_ms"], 1e-3), 2),
                }
            )
    finally:
        changes.close()
        journal.close()
        state_store.close()
    snapshot_ms = _snapshot_ms(store)
    idle_all, busy_all = _stats(all_idle), _stats(all_busy)
    pooled = {
        "tick_gap_idle": idle_all,
        "tick_gap_round": busy_all,
        **{
            f"ratio_{q}": round(busy_all[f"{q}_ms"] / max(idle_all[f"{q}_ms"], 1e-3), 2)
            for q in ("p50", "p99", "max")
        },
        "round_cpu_s_worker_median": round(statistics.median(cpu_s), 2),
        "round_wall_s_median": round(statistics.median(wall_s), 2),
    }
    return {
        "pooled": pooled,
        "rounds": results,
        "snapshot_on_loop_ms": snapshot_ms,
        "routed": len(routed),
        "load_average": os.getloadavg(),
    }


def _snapshot_ms(store: Any) -> float:
    """Milliseconds one copy of the window's series takes on the loop (mean of ten)."""
    started = time.perf_counter()
    for _ in range(10):
        snapshot(store, INSTANCE, SERVED_S - 600.0)
    return round((time.perf_counter() - started) * 100, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="planning rounds (default 3)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state_dir:
        result = asyncio.run(_measure(args.rounds, Path(state_dir)))
    print(json.dumps(result, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
