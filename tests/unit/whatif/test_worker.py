"""The what-if's worker process: the answer comes back, a runaway round is stopped (issue 16)."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
import subprocess
import sys

import pytest

from daemon.core.settings import VllmInstance
from daemon.whatif.errors import WhatIfError
from daemon.whatif.requests import Question
from daemon.whatif.rounds import Round, run_round
from daemon.whatif.series_snapshot import snapshot
from daemon.whatif.worker import plan_off_loop
from simulator.synthetic_workloads import GammaArrivals, LogNormalLengths, WorkloadSpec, generate
from tests.support.syscall_filter import supported
from tests.unit.whatif.metric_histories import INSTANCE, history

INSTANCE_CONFIG = VllmInstance.model_validate(
    {
        "name": INSTANCE,
        "url": "http://127.0.0.1:9",
        "knobs": {"max_num_seqs": {"min": 32, "max": 128, "max_step": 64}},
    }
)


def _round(question: Question) -> Round:
    spec = WorkloadSpec(
        name="w",
        duration_s=300,
        arrivals=GammaArrivals(rate_rps=5.0),
        prompt_tokens=LogNormalLengths(median=800, p90=2000, max=8000),
        output_tokens=LogNormalLengths(median=80, p90=200, max=1000),
    )
    store = history(generate(spec), 300.0)
    return Round(
        instance=INSTANCE_CONFIG,
        series=snapshot(store, INSTANCE, 0.0),
        now=300.0,
        window_s=300.0,
        in_force={"max_num_seqs": 64, "max_num_batched_tokens": 2048},
        question=question,
    )


def test_a_round_in_the_worker_answers_as_the_same_round_in_process() -> None:
    job = _round(Question(simulated_s=60))

    report = asyncio.run(plan_off_loop(job))

    assert {p.setting.max_num_seqs for p in report.ranked} == {32, 64, 128}
    assert report.current.setting.max_num_batched_tokens == 2048
    assert report.cpu_s > 0
    assert report.ranked == run_round(job).ranked
    assert any("max_num_batched_tokens: no envelope" in note for note in report.notes)


def test_a_round_past_its_cpu_bound_is_stopped_and_said_so() -> None:
    job = _round(Question(simulated_s=36_000))  # ten hours of traffic per candidate

    with pytest.raises(WhatIfError, match="ran past its CPU bound of 1 s"):
        asyncio.run(plan_off_loop(job, cpu_limit_s=1))


def test_a_refused_round_says_why() -> None:
    job = _round(Question(profile="no-such-profile"))

    with pytest.raises(WhatIfError, match="no-such-profile"):
        asyncio.run(plan_off_loop(job))


def test_a_round_past_its_wall_clock_bound_is_killed_and_said_so() -> None:
    job = _round(Question(simulated_s=36_000))

    with pytest.raises(WhatIfError, match=r"took longer than 0\.5 s"):
        asyncio.run(plan_off_loop(job, wall_limit_s=0.5))


def test_a_window_shorter_than_asked_is_said_so() -> None:
    job = dataclasses.replace(_round(Question(simulated_s=60)), window_s=3600.0)

    report = run_round(job)

    assert report.notes[0].startswith("the metrics cover 298 s of the 3600 s asked")


# The daemon's side of a round, in a process of its own: what `whatif` runs in the daemon.
_ROUND_IN_A_DAEMON = """
import asyncio, pickle, sys
from daemon.whatif.errors import WhatIfError
from daemon.whatif.worker import plan_off_loop
job = pickle.load(sys.stdin.buffer)
try:
    report = asyncio.run(plan_off_loop(job, cpu_limit_s=float(sys.argv[1])))
except WhatIfError as exc:
    print("refused:", exc)
else:
    print("candidates:", len(report.ranked))
"""


def _under_the_units_filter(job: Round, cpu_limit_s: float) -> str:
    """Run a round as the daemon does under its systemd unit's system call filter."""
    if not supported():
        pytest.skip("the seccomp wrapper is written for x86_64 Linux")
    denied = ["setpriority", "setrlimit", "sched_setscheduler", "sched_setattr"]
    wrapper = [sys.executable, "-m", "tests.support.syscall_filter", *denied, "--"]
    done = subprocess.run(
        [*wrapper, sys.executable, "-c", _ROUND_IN_A_DAEMON, str(cpu_limit_s)],
        input=pickle.dumps(job),
        capture_output=True,
        timeout=120,
        check=True,
    )
    return done.stdout.decode()


def test_a_round_runs_under_the_units_system_call_filter() -> None:
    # systemd/vllm-governor.service: SystemCallFilter=~@privileged @resources, EPERM. nice is
    # denied there; before, the worker died on it ('the what-if worker failed (exit 1):
    # PermissionError') and no round could run under the shipped unit.
    said = _under_the_units_filter(_round(Question(simulated_s=60)), cpu_limit_s=60)

    assert said.strip() == "candidates: 3"


def test_the_cpu_bound_holds_under_the_units_system_call_filter() -> None:
    said = _under_the_units_filter(_round(Question(simulated_s=36_000)), cpu_limit_s=1)

    assert "ran past its CPU bound of 1 s" in said
