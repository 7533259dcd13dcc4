"""Each baseline as described, on a tiny workload."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.app.simulation.baselines import (
    H100_TOTAL_MIB,
    free_gpu_memory_mib,
    naive_rule,
)
from daemon.app.simulation.events import CAP, RESTART
from daemon.app.simulation.names import BEST_STATIC, PER_PHASE, STATIC_DEFAULT
from daemon.app.simulation.reports import build
from daemon.app.simulation.runs import Job, execute, static_name
from daemon.app.simulation.session import GRID_SEQS, GRID_TOKENS, Session, simulate

PROFILE = "llama-3.1-8b-h100-tp1"


def test_static_default_never_changes_anything(tiny: Path) -> None:
    result = execute(Job(STATIC_DEFAULT, PROFILE, None, tiny, 1))
    assert result.events == []
    assert result.restarts == 0
    assert result.downtime_s == 0
    assert result.settings == {"max_num_seqs": 1024, "max_num_batched_tokens": 8192}
    assert {s[1] for s in result.series} == {1024}


def test_free_memory_is_flat_while_vllm_serves_and_total_while_it_restarts() -> None:
    assert free_gpu_memory_mib(True) == pytest.approx(H100_TOTAL_MIB * 0.1)
    assert free_gpu_memory_mib(False) == H100_TOTAL_MIB
    assert naive_rule(free_gpu_memory_mib(True)) == 256
    assert naive_rule(free_gpu_memory_mib(True, utilization=0.97)) == 64
    assert naive_rule(5000.0) is None


def test_naive_script_restarts_exactly_when_its_rule_says(tiny: Path) -> None:
    result = execute(Job("naive-script", PROFILE, None, tiny, 1))
    restarts = [e for e in result.events if e.kind == RESTART]
    # First look at 15 s: 8,156 MiB free > 8000 -> 256 (from 1024), one restart; never again,
    # since the free memory it reads does not move with the load.
    assert [(e.at, e.changes["max_num_seqs"]) for e in restarts] == [(15.0, (1024.0, 256.0))]
    assert result.restarts == 1


@pytest.mark.parametrize("kind", ["gradient2", "aimd", "vegas"])
def test_limiters_move_the_gate_cap_and_never_restart(tiny: Path, kind: str) -> None:
    result = execute(Job(kind, PROFILE, None, tiny, 1))
    caps = [e for e in result.events if e.kind == CAP]
    assert caps
    assert all(e.kind == CAP for e in result.events)
    assert all(4 <= e.changes["gate_cap"][1] <= 1024 for e in caps)
    assert result.restarts == 0


def test_best_static_picks_the_grid_point_with_the_best_goodput(tiny: Path) -> None:
    template = Job("", PROFILE, None, tiny, 1)
    session = Session(template, (1,), (STATIC_DEFAULT, BEST_STATIC, PER_PHASE), 2)
    report, tallies = simulate(session)
    grid = report["grid"]
    assert set(grid) == {static_name(s, t) for s in GRID_SEQS for t in GRID_TOKENS}
    best = report["controllers"][BEST_STATIC]
    assert best["grid_point"] == max(grid, key=grid.__getitem__)
    assert best["goodput_rps"] == pytest.approx(max(grid.values()))
    oracle = report["controllers"][PER_PHASE]
    assert oracle["goodput_rps"] >= best["goodput_rps"] - 1e-9
    for phase, point in oracle["grid_points"].items():
        chosen = oracle["phases"][phase]["goodput_rps"]
        assert all(
            chosen
            >= build(
                {point: tallies[other]},
                profile="p",
                workload="w",
                seeds=[1],
                phases=[],
                bursts=[],
                wanted=[point],
            )["controllers"][point]["phases"][phase]["goodput_rps"]
            - 1e-9
            for other in grid
        )
