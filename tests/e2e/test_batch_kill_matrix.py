"""A batch job survives kill -9 of the daemon at any moment: no line lost, none written twice.

The daemon runs a job against a real ``sim serve`` and is killed (SIGKILL) at each moment that
matters, then started again without the hook; the job must complete with every custom_id of
the input exactly once in the result files. The deterministic moments come from the runner's
test hook (``VLLM_GOVERNOR_TEST_BATCH_CRASH``: the process kills itself at that step), the
mid-way one from the test's own ``kill -9`` while requests are in flight. Each case also checks
what the disk held at the kill, so that it is known to have hit the window it names. A last
case kills it half-way through writing a cancelled job's ``batch_cancelled`` lines.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.batches import (
    Tally,
    batch_config,
    cli,
    eventually,
    job_status,
    ledger_counts,
    line_count,
    submit,
    write_batch,
)
from tests.support.daemon import running_daemon
from tests.support.sim_serve import sim_serve

pytestmark = pytest.mark.slow

LINES = 40
HOOK = "VLLM_GOVERNOR_TEST_BATCH_CRASH"


@dataclass(frozen=True)
class Case:
    """Where the daemon dies, and what the disk must show at that moment."""

    hooks: tuple[str, ...]  # one daemon per hook, each killed by it; "" = the test kills it
    written_minus_done: int | None  # result lines on disk minus lines the ledger marks done
    tear_last_line: bool = False  # then cut the last result line in half (a torn append)
    pieces: bool = False  # long prompts, prefilled in pieces ([batch] prefill_piece_tokens)


CASES = {
    # The first line is marked in flight and not yet sent: nothing is on disk.
    "before any line": Case(("sent:1",), 0),
    # The test's kill -9 half-way, with `concurrency` requests in flight.
    "mid-way, requests in flight": Case(("",), None),
    # The 7th result is on disk (fsync-ed); the ledger does not say so yet.
    "between output write and ledger mark": Case(("written:7",), 1),
    # The 7th result is on disk and marked.
    "after the ledger mark": Case(("marked:7",), 0),
    # The 7th append torn in the middle (what a crash inside the write would leave).
    "torn last line": Case(("written:7",), 1, tear_last_line=True),
    # Killed again while resuming from the first kill, then resumed.
    "two kills in a row": Case(("written:5", "written:9"), 1),
    # The test's kill -9 half-way, lines' pieces and requests in flight.
    "mid-way, prompts in pieces": Case(("",), None, pieces=True),
}
PIECES = 64  # tokens a piece: a 300-word prompt goes in 4 pieces and the line


@pytest.mark.parametrize("name", list(CASES))
def test_a_kill_9_loses_and_duplicates_no_line(short_tmp: Path, name: str) -> None:
    case = CASES[name]
    input_path = short_tmp / "jobs.jsonl"
    output_path = short_tmp / "jobs.output.jsonl"
    ids = write_batch(input_path, LINES, prompt_words=300 if case.pieces else 0)
    with sim_serve(short_tmp, "max-num-seqs: 8\n") as sim:
        extra = f"prefill_piece_tokens = {PIECES}\n" if case.pieces else ""
        config = batch_config(short_tmp, sim.port, concurrency=4, extra=extra)
        job = ""
        for hook in case.hooks:
            with running_daemon(config, env={HOOK: hook} if hook else {}) as daemon:
                daemon.wait_for("READY=1")
                job = job or submit(config, input_path)
                if not hook:
                    eventually(lambda: line_count(output_path) >= LINES // 2, what="half done")
                    daemon.process.kill()
                assert daemon.process.wait(timeout=60) == -9, daemon.log_text()
            at_kill = ledger_counts(short_tmp / "state", job)
            written = line_count(output_path)
            if case.written_minus_done is not None:
                assert written - at_kill["done"] == case.written_minus_done, (written, at_kill)
            else:
                assert at_kill["in_flight"] > 0, at_kill
        if case.tear_last_line:
            data = output_path.read_bytes()
            last = data.rstrip(b"\n").rfind(b"\n") + 1
            output_path.write_bytes(data[: last + (len(data) - last) // 2])
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            eventually(
                lambda: job_status(config, job)["state"] == "completed", what="job completed"
            )
            row = job_status(config, job)
        cached = _prefix_cache_hits(sim.port)
    # With pieces, the server found the pieces' blocks; without, nothing was cached.
    assert (cached > 0) is case.pieces, cached
    tally = Tally.of(ids, input_path)
    print(
        f"\nkill -9 matrix | {name} | lines {tally.lines} | written at kill {written} | "
        f"ledger at kill {dict(at_kill)} | lost {tally.lost} | duplicated {tally.duplicated} | "
        f"errors {tally.errors} | sent {row['sends']} (resent {row['sends'] - LINES})"
    )
    assert (tally.lost, tally.duplicated, tally.errors) == (0, 0, 0)
    assert row["done"] == LINES
    lines = output_path.read_text(encoding="utf-8").splitlines()
    statuses = {json.loads(line)["response"]["status_code"] for line in lines}
    assert statuses == {200}


def _prefix_cache_hits(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("vllm:prefix_cache_hits_total{")
    )


def test_a_kill_9_in_the_middle_of_a_cancel_finishes_the_cancel(short_tmp: Path) -> None:
    input_path = short_tmp / "jobs.jsonl"
    errors_path = short_tmp / "jobs.errors.jsonl"
    # Long answers, two at a time: the job is still running when the CLI pauses it.
    ids = write_batch(input_path, LINES, max_tokens=256)
    with sim_serve(short_tmp, "max-num-seqs: 8\n") as sim:
        config = batch_config(short_tmp, sim.port, concurrency=2)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            job = submit(config, input_path)
            eventually(lambda: job_status(config, job)["done"] >= 3, what="3 lines done")
            assert cli(config, "pause", job).returncode == 0
            eventually(lambda: job_status(config, job)["in_flight"] == 0, what="paused")
        done_when_paused = ledger_counts(short_tmp / "state", job)["done"]
        # Paused, the job writes nothing until the cancel: its 5th batch_cancelled line kills.
        with running_daemon(config, env={HOOK: "written:5"}) as daemon:
            daemon.wait_for("READY=1")
            assert cli(config, "cancel", job).returncode == 0
            assert daemon.process.wait(timeout=60) == -9, daemon.log_text()
        at_kill = ledger_counts(short_tmp / "state", job)
        written = line_count(errors_path)
        assert (written, at_kill["done"]) == (5, done_when_paused + 4)
        with running_daemon(config) as daemon:
            daemon.wait_for("READY=1")
            eventually(lambda: job_status(config, job)["state"] == "cancelled", what="cancelled")
    tally = Tally.of(ids, input_path)
    print(
        f"\nkill -9 matrix | in the middle of a cancel | lines {tally.lines} | done when paused "
        f"{done_when_paused} | cancelled lines at kill {written} | ledger at kill "
        f"{dict(at_kill)} | lost {tally.lost} | duplicated {tally.duplicated} | "
        f"errors {tally.errors}"
    )
    assert (tally.lost, tally.duplicated) == (0, 0)
    assert tally.errors == LINES - done_when_paused
    codes = {json.loads(line)["error"]["code"] for line in errors_path.read_text().splitlines()}
    assert codes == {"batch_cancelled"}
