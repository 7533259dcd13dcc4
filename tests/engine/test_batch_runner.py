"""The job runner on a real event loop: what is retried, what is a result, and deadlines.

A scripted HTTP server on loopback stands in for vLLM where a failure must be made on purpose
(503, 429, 400); the simulated vLLM (``sim serve``) where only its normal answers matter.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from daemon.batch.input_file import read_batch_file
from daemon.batch.jobs import BatchJob, JobState
from daemon.core.batch_settings import BatchSection
from daemon.engine.batches.crash_points import CrashPoints
from daemon.engine.batches.job_runner import JobRunner
from daemon.engine.storage.batch_ledger import BatchLedger
from tests.support.batches import Tally, result_ids, write_batch
from tests.support.sim_serve import sim_serve

pytestmark = pytest.mark.asyncio

START = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
SETTINGS = BatchSection(concurrency=2, retry_base_s=0.01, retry_cap_s=0.02, retry_window_s=5)


@dataclass
class Clock:
    """The loop's own clock for durations; a wall clock the test moves."""

    now: datetime = START

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    def wall(self) -> datetime:
        return self.now


@dataclass
class ScriptedServer:
    """Answers each POST with the next status of ``script`` (then 200), and counts them.

    A GET is answered 404, not counted.
    """

    script: list[int]
    requests: int = 0
    port: int = 0
    bodies: list[bytes] = field(default_factory=list)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if head.startswith(b"GET "):  # a page the lane reads (e.g. /metrics): none here
            writer.write(b"HTTP/1.1 404 X\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        self.bodies.append(await reader.readexactly(length))
        self.requests += 1
        status = self.script.pop(0) if self.script else 200
        body = json.dumps({"id": f"cmpl-{self.requests}", "status": status}).encode()
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()


@asynccontextmanager
async def scripted(script: list[int]) -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer(script)
    listening = await asyncio.start_server(server._serve, "127.0.0.1", 0)
    server.port = listening.sockets[0].getsockname()[1]
    async with listening:
        yield server


def _job(ledger: BatchLedger, path: Path, deadline: datetime | None = None) -> BatchJob:
    batch = read_batch_file(path, max_bytes=1 << 20, max_lines=100)
    job = BatchJob(
        "batch_0123456789abcdef",
        path,
        batch.sha256,
        "main",
        JobState.QUEUED,
        START,
        deadline,
        len(batch.lines),
    )
    ledger.add(job, batch.lines)
    return job


def _runner(job: BatchJob, ledger: BatchLedger, url: str, clock: Clock) -> JobRunner:
    return JobRunner(job, ledger, SETTINGS, base_url=url, clock=clock, crash_points=CrashPoints(""))


async def test_5xx_and_429_are_retried_and_a_4xx_is_a_result(
    tmp_path: Path, ledger: BatchLedger
) -> None:
    path = tmp_path / "jobs.jsonl"
    ids = write_batch(path, 2)
    # Two lines, two workers: the first answers (503, 429) are asked again; the next two
    # (200, 400) are the lines' results, one each.
    async with scripted([503, 429, 200, 400]) as server:
        job = _job(ledger, path)
        state = await _runner(job, ledger, f"http://127.0.0.1:{server.port}", Clock()).run()
    assert state is JobState.COMPLETED
    output, errors = result_ids(path)
    assert (len(output), len(errors)) == (1, 1)
    assert server.requests == 4  # 503 and 429 were asked again; the 400 was not
    refused = json.loads((tmp_path / "jobs.errors.jsonl").read_text())
    assert refused["response"]["status_code"] == 400
    assert Tally.of(ids, path) == Tally(2, 0, 0, 1)


async def test_a_server_that_never_recovers_is_a_result_after_the_retry_window(
    tmp_path: Path, ledger: BatchLedger
) -> None:
    path = tmp_path / "jobs.jsonl"
    write_batch(path, 1)
    settings = BatchSection(concurrency=1, retry_base_s=0.01, retry_cap_s=0.02, retry_window_s=0.1)
    async with scripted([503] * 1000) as server:
        job = _job(ledger, path)
        runner = JobRunner(
            job,
            ledger,
            settings,
            base_url=f"http://127.0.0.1:{server.port}",
            clock=Clock(),
            crash_points=CrashPoints(""),
        )
        assert await runner.run() is JobState.COMPLETED
    assert server.requests > 1
    answer = json.loads((tmp_path / "jobs.errors.jsonl").read_text())
    assert answer["response"]["status_code"] == 503


async def test_a_passed_deadline_expires_the_lines_not_done(
    tmp_path: Path, ledger: BatchLedger
) -> None:
    path = tmp_path / "jobs.jsonl"
    ids = write_batch(path, 30, max_tokens=64)
    clock = Clock()
    with sim_serve(tmp_path, "max-num-seqs: 2\n") as sim:
        job = _job(ledger, path, deadline=START + timedelta(hours=1))
        runner = _runner(job, ledger, f"http://127.0.0.1:{sim.port}", clock)
        running = asyncio.create_task(runner.run())
        while len(result_ids(path)[0]) < 3:
            await asyncio.sleep(0.02)
        clock.now = START + timedelta(hours=2)
        state = await running
    assert state is JobState.EXPIRED
    output, errors = result_ids(path)
    assert len(output) >= 3
    assert len(errors) == 30 - len(output)
    codes = {
        json.loads(line)["error"]["code"]
        for line in (tmp_path / "jobs.errors.jsonl").read_text().splitlines()
    }
    assert codes == {"batch_expired"}
    assert Tally.of(ids, path).lost == 0
    assert Tally.of(ids, path).duplicated == 0


async def test_a_changed_input_file_fails_the_job_and_sends_nothing(
    tmp_path: Path, ledger: BatchLedger
) -> None:
    path = tmp_path / "jobs.jsonl"
    write_batch(path, 3)
    async with scripted([]) as server:
        job = _job(ledger, path)
        write_batch(path, 4)
        state = await _runner(job, ledger, f"http://127.0.0.1:{server.port}", Clock()).run()
    assert state is JobState.FAILED
    assert server.requests == 0
    failed = ledger.job(job.job_id)
    assert failed is not None
    assert "the input file changed since it was submitted" in failed.reason
