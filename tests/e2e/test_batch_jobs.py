"""Batch jobs through the CLI and the daemon: refusals, pause, resume, cancel, a vLLM restart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.batches import (
    Tally,
    batch_config,
    cli,
    eventually,
    job_status,
    line_count,
    result_ids,
    submit,
    write_batch,
)
from tests.support.daemon import running_daemon
from tests.support.services import free_port
from tests.support.sim_serve import sim_serve

pytestmark = pytest.mark.slow


def test_an_invalid_file_is_refused_whole_with_file_and_line(short_tmp: Path) -> None:
    path = short_tmp / "bad.jsonl"
    good = {"method": "POST", "url": "/v1/completions", "body": {"prompt": "x"}}
    path.write_text(
        json.dumps({"custom_id": "a", **good})
        + "\n"
        + json.dumps({"custom_id": "a", **good})
        + "\n"
        + json.dumps({"custom_id": "b", **good, "url": "/v1/embeddings"})
        + "\n",
        encoding="utf-8",
    )
    with sim_serve(short_tmp, "") as sim:
        config = batch_config(short_tmp, sim.port)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            refused = cli(config, "submit", str(path), "--target", "main")
            unknown = cli(config, "submit", str(path), "--target", "other")
            listing = cli(config, "status")
    assert refused.returncode == 1
    assert f"{path}:2: custom_id 'a' repeats line 1" in refused.stderr
    assert f"{path}:3: url must be one of /v1/completions" in refused.stderr
    assert "unknown target 'other'" in unknown.stderr
    assert listing.stdout.strip() == "no batch job"
    assert not (short_tmp / "bad.output.jsonl").exists()


def test_pause_stops_a_job_that_resume_finishes_and_cancel_ends_one(short_tmp: Path) -> None:
    first, second = short_tmp / "first.jsonl", short_tmp / "second.jsonl"
    first_ids = write_batch(first, 30, max_tokens=64)
    second_ids = write_batch(second, 30, max_tokens=64)
    with sim_serve(short_tmp, "max-num-seqs: 4\n") as sim:
        config = batch_config(short_tmp, sim.port, concurrency=2)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            job = submit(config, first)
            eventually(lambda: job_status(config, job)["done"] >= 4, what="4 lines of the first")
            paused = cli(config, "pause", job)
            assert paused.returncode == 0, paused.stderr
            assert " paused: " in paused.stdout
            eventually(lambda: job_status(config, job)["in_flight"] == 0, what="nothing in flight")
            done_when_paused = job_status(config, job)["done"]
            # The paused job lets the next one run; cancel that one half-way.
            other = submit(config, second)
            eventually(lambda: job_status(config, other)["done"] >= 3, what="3 of the second")
            assert cli(config, "cancel", other).returncode == 0
            eventually(lambda: job_status(config, other)["state"] == "cancelled", what="cancel")
            assert job_status(config, job)["done"] == done_when_paused
            assert cli(config, "resume", job).returncode == 0
            eventually(lambda: job_status(config, job)["state"] == "completed", what="resumed")
            refused = cli(config, "resume", job)
            listing = cli(config, "status").stdout.splitlines()
    assert [line.split()[:2] for line in listing] == [[job, "completed:"], [other, "cancelled:"]]
    assert "only a paused or failed job can be resumed" in refused.stderr
    assert Tally.of(first_ids, first) == Tally(30, 0, 0, 0)
    cancelled = Tally.of(second_ids, second)
    assert (cancelled.lost, cancelled.duplicated) == (0, 0)
    output, errors = result_ids(second)
    assert len(output) >= 3
    assert len(errors) == 30 - len(output)
    codes = {
        json.loads(line)["error"]["code"]
        for line in (short_tmp / "second.errors.jsonl").read_text().splitlines()
    }
    assert codes == {"batch_cancelled"}


def test_a_vllm_restart_mid_job_is_retried_not_written_as_errors(short_tmp: Path) -> None:
    path = short_tmp / "jobs.jsonl"
    ids = write_batch(path, 40)
    port = free_port()
    (short_tmp / "after").mkdir()
    with sim_serve(short_tmp, "max-num-seqs: 8\n", port=port) as sim:
        config = batch_config(short_tmp, port, concurrency=4)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            job = submit(config, path)
            eventually(lambda: line_count(short_tmp / "jobs.output.jsonl") >= 10, what="10 done")
            sim.process.kill()
            sim.process.wait()
            done_at_kill = line_count(short_tmp / "jobs.output.jsonl")
            # The requests in flight were cut off and the port refuses: they are retried.
            with sim_serve(short_tmp / "after", "max-num-seqs: 8\n", port=port):
                eventually(lambda: job_status(config, job)["state"] == "completed", what="done")
                row = job_status(config, job)
    assert Tally.of(ids, path) == Tally(40, 0, 0, 0)
    assert done_at_kill < 40  # the restart came in the middle of the job
    assert row["sends"] >= 40


def test_files_dropped_into_the_inbox_run_and_a_broken_one_is_refused_with_a_note(
    short_tmp: Path,
) -> None:
    inbox = short_tmp / "inbox"
    inbox.mkdir()
    staged = short_tmp / "staging.jsonl"
    ids = write_batch(staged, 10)
    staged.rename(inbox / "night.jsonl")
    (inbox / "broken.jsonl").write_text('{"custom_id": \n', encoding="utf-8")
    extra = f'inbox_dir = "{inbox}"\ninbox_target = "main"\ninbox_poll_s = 0.2\n'
    with sim_serve(short_tmp, "") as sim:
        config = batch_config(short_tmp, sim.port, extra=extra)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")

            def jobs() -> list[dict[str, object]]:
                listed: list[dict[str, object]] = json.loads(
                    cli(config, "status", "--json").stdout
                )["jobs"]
                return listed

            eventually(
                lambda: [job["state"] for job in jobs()] == ["completed"], what="inbox job done"
            )
            eventually((inbox / "broken.rejected.txt").exists, what="the refusal's note")
            listed = jobs()
    assert [job["input"] for job in listed] == [str(inbox / "night.jsonl")]
    assert Tally.of(ids, inbox / "night.jsonl") == Tally(10, 0, 0, 0)
    note = (inbox / "broken.rejected.txt").read_text()
    assert note.startswith(f"{inbox}/broken.jsonl:1: is not valid JSON")
