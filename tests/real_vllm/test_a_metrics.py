"""The vLLM source against a real vLLM 0.32 under load: every canonical signal, plausible.

The server runs a small KV pool (40 blocks of 32 tokens) at max-num-seqs 16: 16 requests of
~250 tokens need ~128 blocks, so the scheduler preempts for real and ``preemptions_per_s`` is
seen as a rate.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support.real_vllm import RealVllm
from tests.support.signals_cli import collect, signals_config

pytestmark = [pytest.mark.real_vllm, pytest.mark.slow, pytest.mark.timeout(600)]

QUANTILES = [f"{kind}_{q}_s" for kind in ("ttft", "tpot", "e2e", "queue") for q in ("p50", "p95")]
WINDOW_S = 20.0


def test_every_canonical_signal_is_ok_and_plausible_under_load(
    server: RealVllm, short_tmp: Path
) -> None:
    config = signals_config(short_tmp, server.url, window_s=WINDOW_S / 2)
    # 32 clients keep more than max-num-seqs busy (so some wait) until the collection ends:
    # stopped then, not after a fixed number of requests. 20 each (640) were all served in
    # 20-45 s, so on a CI machine the load had ended before the collection's first scrape (the
    # CLI starts slowly under load) and every quantile read no_data.
    with server.load(clients=32, requests_per_client=10_000, max_tokens=220) as load:
        rows = collect(config, WINDOW_S)
        covered = load.all_sending()
        load.stop()
    assert covered, "the load ran dry before the collection ended"
    outcomes = load.outcomes()
    assert all(outcome.ok for outcome in outcomes), [o for o in outcomes if not o.ok][:3]
    assert all(outcome.tokens == 220 for outcome in outcomes)
    wanted = {"running", "waiting", "kv_usage", "healthy", "preemptions_per_s",
              "gen_tokens_per_s", "prompt_tokens_per_s", "num_gpu_blocks", *QUANTILES}  # fmt: skip
    not_ok = {
        name: rows[name]["state"] for name in wanted if rows.get(name, {}).get("state") != "ok"
    }
    assert not_ok == {}, not_ok
    value = {name: float(rows[name]["value"]) for name in wanted}
    assert value["healthy"] == 1.0
    assert value["num_gpu_blocks"] == 40.0  # --num-gpu-blocks-override, as the server reports it
    assert 0.0 <= value["running"] <= 16.0
    assert value["waiting"] >= 0.0
    assert 0.0 <= value["kv_usage"] <= 1.0
    assert value["preemptions_per_s"] > 0.0, "a 40-block pool under 16 x 250 tokens preempts"
    assert value["gen_tokens_per_s"] > 10.0
    assert value["prompt_tokens_per_s"] > 0.0
    for kind in ("ttft", "tpot", "e2e", "queue"):
        p50, p95 = value[f"{kind}_p50_s"], value[f"{kind}_p95_s"]
        assert 0.0 <= p50 <= p95 < 120.0, (kind, p50, p95)
    # TPOT of a tiny model on a CPU: milliseconds to a second per token, never zero.
    assert 0.0005 < value["tpot_p50_s"] < 2.0


def test_an_idle_server_reads_zero_rates_and_no_latency(server: RealVllm, short_tmp: Path) -> None:
    threading.Event().wait(2.0)  # the previous test's last requests leave the window
    rows = collect(signals_config(short_tmp, server.url, window_s=3.0), 6.0)
    assert rows["running"]["value"] == 0.0
    assert rows["gen_tokens_per_s"]["state"] == "ok"
    assert rows["gen_tokens_per_s"]["value"] == 0.0
    assert rows["ttft_p95_s"]["state"] == "no_data", "no request finished: no data, never 0"
