"""The batch lane's priority on a real vLLM (the CPU build): how the governor knows the server
runs priority scheduling, and that online requests then overtake batch requests waiting."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable

import pytest

from daemon.batch.input_file import BatchLine
from daemon.batch.scheduling import read_scheduling
from daemon.core.batch_settings import BatchSection
from daemon.core.clock import SystemClock
from daemon.core.http_client import HttpLimits, http_request
from daemon.engine.batches.line_sender import LineSender
from tests.support.real_vllm import EXACT, READY_S, RealVllm

pytestmark = [pytest.mark.real_vllm, pytest.mark.slow, pytest.mark.timeout(900)]

BATCH_PRIORITY = 1000


def _body(max_tokens: int, **more: object) -> str:
    return json.dumps({"prompt": "once upon a time", "max_tokens": max_tokens, **EXACT, **more})


async def _online(url: str, max_tokens: int) -> float:
    """One online request (no priority: 0); its latency in seconds."""
    started = time.monotonic()
    answer = await http_request(
        "POST",
        url + "/v1/completions",
        HttpLimits(total_s=300.0, max_body_bytes=1 << 20),
        body=_body(max_tokens).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert answer.status == 200, answer.body[:300]
    return time.monotonic() - started


async def _batch(sender: LineSender, line: BatchLine) -> float:
    started = time.monotonic()
    result = await sender.send(line)
    assert b'"status_code": 200' in result.data or b'"status_code":200' in result.data, result.data
    return time.monotonic() - started


@pytest.mark.asyncio
async def test_the_governor_reads_the_policy_and_online_requests_overtake_batch_ones(
    server: RealVllm,
) -> None:
    # Earlier tests may have left the server at WARNING, where the start-up line is not said.
    server.env_file.write_text("# the unit's environment\nVLLM_LOGGING_LEVEL=INFO\n")
    found = read_scheduling(server.program_log, server.vllm_yaml)
    print(f"as found: {found}")
    # A priority on the server as found (fcfs): what this vLLM answers to it.
    fcfs = await http_request(
        "POST",
        server.url + "/v1/completions",
        HttpLimits(total_s=120.0, max_body_bytes=1 << 20),
        body=_body(4, priority=BATCH_PRIORITY).encode(),
        headers={"Content-Type": "application/json"},
    )
    print(f"fcfs, priority {BATCH_PRIORITY}: HTTP {fcfs.status} {fcfs.body[:200]!r}")
    config = server.vllm_yaml.read_text()
    server.vllm_yaml.write_text(config + "scheduling-policy: priority\n")
    try:
        restarted = server.ctl("restart", "vllm")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        server.wait_ready(READY_S)
        stated = read_scheduling(server.program_log, server.vllm_yaml)
        print(f"after the restart: {stated}")
        assert (stated.policy, stated.priority) == ("priority", True)
        assert "start-up line" in stated.source  # the server's own word, not the file's
        sender = LineSender(
            "batch_real",
            server.url,
            BatchSection(),
            SystemClock(),
            priority=lambda: BATCH_PRIORITY,
        )
        lines = [
            BatchLine(index + 1, f"b{index}", "/v1/completions", _body(96).encode())
            for index in range(24)
        ]
        batch = [asyncio.create_task(_done_at(_batch(sender, line))) for line in lines]
        # The online requests arrive once batch requests wait in vLLM (24 for at most 16
        # slots): how long that takes depends on the machine, so it is watched, not slept.
        waiting = await _until_requests_wait(server.url)
        online = await asyncio.gather(*(_done_at(_online(server.url, 96)) for _ in range(4)))
        batch_done = await asyncio.gather(*batch)
    finally:
        server.vllm_yaml.write_text(config)
    after = sum(1 for done in batch_done if done > max(online))
    print(f"{waiting:g} batch request(s) waiting when the online ones came; {after} ended later")
    # Priority: the online requests take the next free slots, ahead of the batch requests
    # already waiting, so some of those end after every online one. FCFS: none would.
    assert after >= 1, (online, sorted(batch_done))


async def _done_at(request: Awaitable[float]) -> float:
    """When ``request`` ended, on the monotonic clock."""
    await request
    return time.monotonic()


async def _until_requests_wait(url: str) -> float:
    """How many requests wait in vLLM, once some do (within 60 s)."""
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        page = await http_request("GET", url + "/metrics", HttpLimits(total_s=10.0))
        for line in page.body.decode().splitlines():
            if line.startswith("vllm:num_requests_waiting") and float(line.split()[-1]) > 0:
                return float(line.split()[-1])
        await asyncio.sleep(0.05)
    raise AssertionError("no batch request ever waited in vLLM: the scene needs more of them")
