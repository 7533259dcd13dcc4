"""A restart of vLLM while a batch job runs: the lane closes first, and no line is lost or
written twice (issue 18). The daemon restarts a supervised ``sim serve`` (``operation:
restart``, journaled, drained, verified) half-way through a job."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.batches import Tally, cli, job_status, write_batch
from tests.support.daemon import running_daemon
from tests.support.retune import eventually, governor_config, journal
from tests.support.supervised_sim import supervised_sim

pytestmark = [pytest.mark.service("supervisord"), pytest.mark.slow]

RESTART = """\
name: maintenance
targets: [sim]
when: waiting >= 0.0
action: {operation: restart, risk: auto}
cooldown: 1h
"""


def test_a_restart_closes_the_batch_lane_first_and_no_line_is_lost_or_doubled(
    short_tmp: Path,
) -> None:
    path = short_tmp / "night.jsonl"
    ids = write_batch(path, 160, max_tokens=128)
    with supervised_sim(short_tmp, "max-num-seqs: 8\n") as sim:
        config = governor_config(short_tmp, sim)
        config.write_text(
            config.read_text() + "[batch]\nconcurrency = 4\nretry_base_s = 0.1\nretry_cap_s = 0.5\n"
        )
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            submitted = cli(config, "submit", str(path), "--target", "sim")
            assert submitted.returncode == 0, submitted.stderr
            job = submitted.stdout.split(":", 1)[0]
            eventually(
                lambda: True if job_status(config, job)["done"] >= 8 else None,
                "8 lines done",
                daemon,
            )
            # The restart comes while the job runs: a policy dropped in now.
            (short_tmp / "policies" / "maintenance.yaml").write_text(RESTART)

            def restarted() -> dict[str, object] | None:
                done = [e for e in journal(short_tmp) if e["state"] != "open"]
                return done[0] if done else None

            entry = eventually(restarted, "the restart finished", daemon, timeout_s=90)
            during = job_status(config, job)
            eventually(
                lambda: True if job_status(config, job)["state"] == "completed" else None,
                "the job completed",
                daemon,
                timeout_s=240,
            )
            row = job_status(config, job)
    facts = entry["facts"]
    assert isinstance(facts, dict)
    print(f"drain: {facts['drain']}; restart: {facts['restart']}; job: {row}")
    assert entry["state"] == "done", entry
    assert sim.spawns() == 2
    # The lane closed before the drain, with batch requests in flight that it stopped.
    assert str(facts["drain"]).startswith("batch lane closed, "), facts["drain"]
    assert "0 batch request(s) stopped" not in str(facts["drain"])
    # So the draining server refused none of them.
    assert facts["restart"]["refused_in_drain"] in (0, None)
    assert during["state"] == "running"
    tally = Tally.of(ids, path)
    assert (tally.lost, tally.duplicated) == (0, 0)
    assert row["done"] == 160
    assert row["sends"] > 160  # the stopped requests were sent again after the restart
