"""The batch window on a real daemon and ``sim serve``: a policy opens the lane, and the lane's
own load does not close it again (issue 18: batch traffic is kept out of the online signals)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.batches import Tally, batch_config, eventually, job_status, submit, write_batch
from tests.support.daemon import running_daemon
from tests.support.sim_serve import sim_serve

pytestmark = pytest.mark.slow

# Open the lane while the online traffic is quiet; vLLM's `running` counts the lane's own
# requests too, so without separate accounting this policy would close the lane it opened.
QUIET_FILL = """\
name: quiet-fill
when: running < 2.0 && waiting < 1.0
keep_firing_for: 3s
action:
  batch: {open: true, concurrency: 4}
"""


def _lane_moves(log_text: str) -> list[tuple[int, int]]:
    moves = []
    for line in log_text.splitlines():
        if "batch lane moved" in line:
            record = json.loads(line)
            moves.append((record["before"], record["after"]))
    return moves


def test_a_window_policy_opens_the_lane_and_its_own_load_does_not_close_it(
    short_tmp: Path,
) -> None:
    policies = short_tmp / "policies"
    policies.mkdir()
    (policies / "quiet-fill.yaml").write_text(QUIET_FILL, encoding="utf-8")
    path = short_tmp / "night.jsonl"
    ids = write_batch(path, 40, max_tokens=96)
    # The server runs priority scheduling, as its config file says: the lane is not held to
    # fcfs's tight bound, and its requests go at the lowest priority.
    with sim_serve(short_tmp, "max-num-seqs: 8\nscheduling-policy: priority\n") as sim:
        config = batch_config(short_tmp, sim.port, concurrency=4)
        text = config.read_text(encoding="utf-8").replace(
            "policy_dirs = []", f'policy_dirs = ["{policies}"]\nevaluation_interval_s = 1.0'
        )
        served = f'config_path = "{short_tmp / "vllm.yaml"}"\nunit = "sim.service"\n[batch]'
        config.write_text(text.replace("[batch]", served, 1), encoding="utf-8")
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            job = submit(config, path)
            eventually(lambda: job_status(config, job)["done"] >= 8, 120, "8 lines done")
            middle = job_status(config, job)["lane"]
            eventually(lambda: job_status(config, job)["state"] == "completed", 180, "completed")
            lane = job_status(config, job)["lane"]
            moves = _lane_moves(daemon.log_text())
    print(f"lane moves {moves}; mid-job lane {middle}; after {lane}")
    assert (middle["width"], middle["policy"], middle["priority"]) == (4, "quiet-fill", 1000)
    # Opened once, never closed under its own load, never cut a request off.
    assert moves[:1] == [(0, 4)]
    assert (0, 4) not in moves[1:]
    assert lane["narrowed"] == 0
    tally = Tally.of(ids, path)
    assert (tally.lost, tally.duplicated) == (0, 0)
