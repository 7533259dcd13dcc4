"""The what-if's own cost, and how well its ranking matches a brute-force static grid.

For each workload: the true workload (the simulator's generator, seed 1) is served by the
simulated engine at vLLM's defaults and scraped every 2 s as the daemon scrapes vLLM (page text,
the vLLM source's parser, the signal store); one planning round then characterises the last
10 minutes and replays 5 minutes of the synthesised workload per candidate, once in this
process (its CPU seconds, split into characterisation and planning) and once through the
worker process as the daemon runs it (the child's CPU seconds and the wall time). Meanwhile a
10 ms ticker on the event loop measures how late it runs, against 3 s of the same ticker
with nothing else to do: what the daemon's fast loop would feel of a round.

Brute force: every candidate serves the *true* workload (another seed, 20 minutes, static
settings) and is judged under the same SLO. The what-if's predicted goodput (before the
restart's cost) is compared with it: Spearman rank correlation over the candidates, whether
the best candidates agree, the regret of the what-if's best candidate (the goodput it would
really get against the best static setting in hindsight), and the median prediction error
(over all candidates, and over the better half in hindsight, those a pick could land on).

    .venv/bin/python -m bench.whatif_cost [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.core.settings import Envelope, VllmInstance
from daemon.whatif.candidates import Setting, candidate_grid
from daemon.whatif.characterisation import characterise, observe_steps
from daemon.whatif.planning import PlanRequest, plan
from daemon.whatif.prediction import Slo
from daemon.whatif.requests import Question
from daemon.whatif.rounds import Round
from daemon.whatif.series_snapshot import snapshot
from daemon.whatif.worker import plan_off_loop
from simulator.engine import Engine
from simulator.profiles import load_profile
from simulator.settings import EngineSettings
from simulator.synthetic_workloads import GammaArrivals, LogNormalLengths, WorkloadSpec, generate
from simulator.virtual_time import VirtualRun
from tests.unit.whatif.scraped_runs import INSTANCE, scraped_store

PROFILE = "llama-3.1-8b-h100-tp1"
SERVED_S = 900.0
WINDOW_S = 600.0
BRUTE_S = 1200.0
ENVELOPES = {
    "max_num_seqs": Envelope(min=16, max=1024, max_step=512),
    "max_num_batched_tokens": Envelope(min=512, max=8192, max_step=4096),
}


@dataclass(frozen=True)
class Case:
    """One workload and its objectives."""

    name: str
    rate: float
    prompt: tuple[float, float]
    output: tuple[float, float]
    slo: Slo

    def spec(self, duration_s: float, seed: int) -> WorkloadSpec:
        return WorkloadSpec(
            name=self.name,
            duration_s=duration_s,
            seed=seed,
            arrivals=GammaArrivals(rate_rps=self.rate, cv=1.0),
            prompt_tokens=LogNormalLengths(median=self.prompt[0], p90=self.prompt[1], max=16000),
            output_tokens=LogNormalLengths(median=self.output[0], p90=self.output[1], max=4000),
        )


CASES = (
    Case("code-like, TPOT-bound", 8.0, (4000, 8800), (60, 150), Slo(2.0, 0.050)),
    Case("conversation", 20.0, (1020, 2734), (129, 424), Slo()),
)


def measure(case: Case) -> dict[str, Any]:
    profile = load_profile(PROFILE)
    defaults = EngineSettings.defaults(profile)
    current = Setting(defaults.max_num_seqs, defaults.max_num_batched_tokens)
    store = scraped_store(profile, defaults, generate(case.spec(SERVED_S, 1)), SERVED_S)

    started = time.process_time()
    summary = characterise(store, INSTANCE, SERVED_S, WINDOW_S)
    steps = observe_steps(store, INSTANCE, SERVED_S, WINDOW_S)
    characterise_cpu = time.process_time() - started
    candidates = tuple(candidate_grid(current, ENVELOPES))
    request = PlanRequest(summary, PROFILE, current, candidates, steps=steps, slo=case.slo)
    report = plan(request)

    worker = _through_worker(store, case, current)

    brute = {p.setting: _static_goodput(profile, p.setting, case) for p in report.ranked}
    predicted = {p.setting: p.goodput_rps for p in report.ranked}
    settings = sorted(brute)
    best_brute = max(settings, key=lambda s: brute[s])
    best_predicted = max(settings, key=lambda s: predicted[s])
    errors = {s: abs(predicted[s] - brute[s]) / brute[s] for s in settings if brute[s] > 0}
    # The settings that matter: the better half in hindsight. The others are unstable at this
    # load, and a 5-minute replay sees less of their queue's growth than 20 minutes do.
    better = sorted(errors, key=lambda s: brute[s], reverse=True)[: max(1, len(errors) // 2)]
    return {
        "workload": case.name,
        "candidates": len(settings),
        "characterise_cpu_s": round(characterise_cpu, 3),
        "plan_cpu_s": round(report.cpu_s, 3),
        **{f"worker_round_{key}": value for key, value in worker.items()},
        "profile_check": report.profile_check.verdict,
        "pick": None if report.pick is None else report.pick.label(),
        "best_predicted": best_predicted.label(),
        "best_static_in_hindsight": best_brute.label(),
        "spearman": round(
            _spearman([predicted[s] for s in settings], [brute[s] for s in settings]), 3
        ),
        "regret": round(1 - brute[best_predicted] / brute[best_brute], 4),
        "median_goodput_error": round(statistics.median(errors.values()), 4),
        "median_goodput_error_better_half": round(statistics.median(errors[s] for s in better), 4),
        "current_brute_goodput_rps": round(brute[current], 3),
        "best_brute_goodput_rps": round(brute[best_brute], 3),
    }


def _through_worker(store: Any, case: Case, current: Setting) -> dict[str, float]:
    instance = VllmInstance.model_validate(
        {
            "name": INSTANCE,
            "url": "http://127.0.0.1:9",
            "knobs": {name: envelope.model_dump() for name, envelope in ENVELOPES.items()},
        }
    )
    job = Round(
        instance=instance,
        series=snapshot(store, INSTANCE, SERVED_S - WINDOW_S),
        now=SERVED_S,
        window_s=WINDOW_S,
        in_force={knob: float(value) for knob, value in current.as_knobs().items()},
        question=Question(profile=PROFILE, slo=case.slo),
    )
    started = time.perf_counter()
    series = snapshot(store, INSTANCE, SERVED_S - WINDOW_S)
    on_loop = time.perf_counter() - started
    job = dataclasses.replace(job, series=series)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    idle_lag = asyncio.run(_loop_lag(asyncio.sleep(3.0)))
    busy_lag = asyncio.run(_loop_lag(plan_off_loop(job)))
    wall = time.monotonic() - started - 3.0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "snapshot_on_loop_ms": round(on_loop * 1000, 2),
        "tick_lag_idle_p99_ms": idle_lag[0],
        "tick_lag_idle_max_ms": idle_lag[1],
        "tick_lag_round_p99_ms": busy_lag[0],
        "tick_lag_round_max_ms": busy_lag[1],
    }


async def _loop_lag(work: Any) -> tuple[float, float]:
    """How late a 10 ms ticker on the same loop runs while ``work`` is awaited (p99, max)."""
    lags: list[float] = []

    async def tick() -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + 0.010
            await asyncio.sleep(0.010)
            lags.append(loop.time() - due)

    ticker = asyncio.create_task(tick())
    try:
        await work
    finally:
        ticker.cancel()
    ordered = sorted(lags)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return round(p99 * 1000, 2), round(ordered[-1] * 1000, 2)


def _static_goodput(profile: Any, setting: Setting, case: Case) -> float:
    settings = EngineSettings.defaults(profile, **setting.as_knobs())
    run = VirtualRun(Engine(profile, settings), generate(case.spec(BRUTE_S, 2)))
    run.run(BRUTE_S + BRUTE_S / 2)
    return sum(1 for r in run.finished if case.slo.met_by(r)) / BRUTE_S


def _spearman(xs: list[float], ys: list[float]) -> float:
    rx, ry = _ranks(xs), _ranks(ys)
    return statistics.correlation(rx, ry) if len(set(rx)) > 1 and len(set(ry)) > 1 else 1.0


def _ranks(values: list[float]) -> list[float]:
    ordered = sorted(range(len(values)), key=lambda index: values[index])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and values[ordered[end + 1]] == values[ordered[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[ordered[position]] = (start + end) / 2
        start = end + 1
    return ranks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results = [measure(case) for case in CASES]
    for result in results:
        print(json.dumps(result))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
