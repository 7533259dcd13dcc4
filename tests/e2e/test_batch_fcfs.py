"""The batch lane on an fcfs server (``sim serve`` without priority scheduling) under online
load: the governor's own limit is the only protection, so the lane stays shut while online
requests queue, and the job runs once they are gone (issue 18)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.batches import Tally, batch_config, eventually, job_status, submit, write_batch
from tests.support.daemon import running_daemon
from tests.support.sim_serve import sim_serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ALWAYS = """\
name: always-open
when: running >= 0.0
action:
  batch: {open: true, concurrency: 4}
"""
# 20 s of online load beyond what 4 sequences serve: requests queue in vLLM, and the queue
# drains within seconds of the end.
ONLINE_BURST = """\
name: burst
duration_s: 20
seed: 5
arrivals: {rate_rps: 15}
prompt_tokens: {median: 100, p90: 200, max: 400}
output_tokens: {median: 60, p90: 90, max: 120}
"""


def test_an_fcfs_lane_stays_shut_while_online_requests_queue(short_tmp: Path) -> None:
    policies = short_tmp / "policies"
    policies.mkdir()
    (policies / "always-open.yaml").write_text(ALWAYS, encoding="utf-8")
    path = short_tmp / "night.jsonl"
    ids = write_batch(path, 12, max_tokens=32)
    with sim_serve(short_tmp, "max-num-seqs: 4\n", load=ONLINE_BURST) as sim:
        config = batch_config(short_tmp, sim.port, concurrency=4)
        text = config.read_text(encoding="utf-8").replace(
            "policy_dirs = []", f'policy_dirs = ["{policies}"]\nevaluation_interval_s = 1.0'
        )
        served = f'config_path = "{short_tmp / "vllm.yaml"}"\nunit = "sim.service"\n[batch]'
        config.write_text(text.replace("[batch]", served, 1), encoding="utf-8")
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            job = submit(config, path)

            def shut_by_the_queue() -> bool:
                lane = job_status(config, job)["lane"]
                return lane["policy"] == "always-open" and "wait in vLLM" in lane["reason"]

            eventually(shut_by_the_queue, 30, "the lane shut by the online queue")
            during = job_status(config, job)
            eventually(lambda: job_status(config, job)["state"] == "completed", 150, "done")
            after = job_status(config, job)
            log = daemon.log_text()
    moves = [
        (record["before"], record["after"], record["reason"])
        for record in map(json.loads, filter(None, log.splitlines()))
        if record.get("msg") == "batch lane moved"
    ]
    print(f"during the burst: {during['lane']}, done {during['done']}; moves {moves}")
    assert during["done"] == 0
    assert during["lane"]["width"] == 0
    assert during["lane"]["priority"] is None  # fcfs: no priority is sent
    assert "fcfs" in during["lane"]["scheduling"]
    # Opened only once the queue was gone, 1 wide: a quarter of max-num-seqs 4.
    assert moves, log[-3000:]
    assert all(after_width <= 1 for _, after_width, _ in moves)
    tally = Tally.of(ids, path)
    assert (tally.lost, tally.duplicated) == (0, 0)
    assert after["done"] == 12
