"""One contract, two servers: the governor sees the same signals from ``sim serve`` and real vLLM.

The simulator stands in for vLLM wherever the governor looks, so under load both must give
every signal the policies read, in the state ``ok``. Where they differ, the difference is
listed here with its reason. The signal *values* are compared in docs/fidelity.md; here the
set is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.real_vllm import RealVllm
from tests.support.signals_cli import Rows, collect, signals_config
from tests.support.supervised_sim import SATURATING_WORKLOAD, supervised_sim

pytestmark = [pytest.mark.real_vllm, pytest.mark.slow, pytest.mark.timeout(600)]

# What a policy may read of a vLLM server, ok under load on both.
CONTRACT = {
    "running", "waiting", "kv_usage", "healthy", "num_gpu_blocks", "gpu_memory_utilization",
    "preemptions_per_s", "gen_tokens_per_s", "prompt_tokens_per_s", "errors_per_s",
    "aborts_per_s", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "tpot_p50_s", "tpot_p95_s",
    "tpot_p99_s", "e2e_p50_s", "e2e_p95_s", "e2e_p99_s", "queue_p50_s", "queue_p95_s",
    "queue_p99_s", "rejections_per_s", "request_tpot_p50_s", "request_tpot_p95_s",
    "request_tpot_p99_s",
}  # fmt: skip
# Signals only one of them gives, and why: none today (both expose every counter from the
# start, vllm:admission_rejections per reason included). Without a gate in front, the gate_*
# signals are no_data on both.
ONLY_ONE: dict[str, str] = {}
WINDOW_S = 16.0


@contextmanager
def loaded(kind: str, server: RealVllm | None, directory: Path) -> Iterator[str]:
    """A server of ``kind`` under a load that keeps it busy; yields its URL."""
    if kind == "sim":
        with supervised_sim(directory, "max-num-seqs: 16\n", load=SATURATING_WORKLOAD) as sim:
            yield sim.url
        return
    assert server is not None
    with server.load(clients=24, requests_per_client=40, max_tokens=120) as load:
        yield server.url
        load.stop()


def ok_signals(rows: Rows) -> set[str]:
    return {name for name, row in rows.items() if row["state"] == "ok"}


@pytest.mark.parametrize("kind", ["sim", "real"])
def test_sim_serve_and_real_vllm_give_the_governor_the_same_signals(
    kind: str, request: pytest.FixtureRequest, short_tmp: Path
) -> None:
    server = request.getfixturevalue("server") if kind == "real" else None
    with loaded(kind, server, short_tmp) as url:
        rows = collect(signals_config(short_tmp, url, window_s=WINDOW_S / 2), WINDOW_S)
    seen = ok_signals(rows)
    missing = CONTRACT - seen
    assert missing == set(), f"{kind} lacks {sorted(missing)}: {[rows.get(n) for n in missing]}"
    beyond = {name for name in seen - CONTRACT if not name.startswith("gate_")}
    assert beyond <= set(ONLY_ONE), f"{kind} gives signals the contract does not list: {beyond}"
