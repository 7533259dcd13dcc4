"""Batch prompts prefilled in pieces through the prefix cache, against the simulated vLLM.

A real ``sim serve`` (its prefix cache on, as vLLM V1's is by default) answers; its own
``/metrics`` say what its engine did: how many steps carried more than 512 tokens
(``iteration_tokens_total``), how many prompt tokens it found cached, how many requests it
served. The lines' results must not change with the pieces: one answer each, its own usage.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.batch.input_file import read_batch_file
from daemon.batch.jobs import BatchJob, JobState
from daemon.core.batch_settings import BatchSection
from daemon.engine.batches.crash_points import CrashPoints
from daemon.engine.batches.job_runner import JobRunner
from daemon.engine.batches.lanes import Lane
from daemon.engine.batches.prefill_pieces import piece_ends, prefix_caching_in
from daemon.engine.storage.batch_ledger import BatchLedger
from tests.engine.test_batch_runner import Clock, scripted
from tests.support.sim_serve import MODEL, sim_serve

pytestmark = pytest.mark.asyncio

START = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
PIECE = 256
WORDS = 1000  # the simulated model reads one token per word
LINES = 3


def _write(path: Path, lines: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def _completion(index: int, prompt: object) -> dict[str, object]:
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 4}
    return {"custom_id": f"c{index}", "method": "POST", "url": "/v1/completions", "body": body}


def _text(index: int) -> str:
    # Each line's own first word: no two prompts share a block.
    return " ".join([f"line{index}", *(f"w{n % 50}" for n in range(WORDS - 1))])


async def _run(path: Path, ledger: BatchLedger, url: str, pieces: int) -> tuple[JobState, Lane]:
    batch = read_batch_file(path, max_bytes=1 << 24, max_lines=100)
    job_id = f"batch_{pieces:016x}"
    job = BatchJob(
        job_id, path, batch.sha256, "main", JobState.QUEUED, START, None, len(batch.lines)
    )
    ledger.add(job, batch.lines)
    settings = BatchSection(concurrency=2, prefill_piece_tokens=pieces)
    lane = Lane("main", 2, "fixed")
    runner = JobRunner(
        job, ledger, settings, base_url=url, clock=Clock(), crash_points=CrashPoints(""), lane=lane
    )
    return await runner.run(), lane


def _engine(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found = {"steps_over_512": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "vllm:iteration_tokens_total_bucket":
                if sample.labels["le"] == "512.0":
                    found["steps_up_to_512"] = sample.value
            elif sample.name == "vllm:iteration_tokens_total_count":
                found["steps"] = sample.value
            elif sample.name in (
                "vllm:prefix_cache_hits_total",
                "vllm:prefix_cache_queries_total",
                "vllm:request_success_total",
            ):
                found[sample.name] = found.get(sample.name, 0.0) + sample.value
    found["steps_over_512"] = found["steps"] - found["steps_up_to_512"]
    return found


def _answers(path: Path) -> dict[str, int]:
    output = path.with_name(path.stem + ".output.jsonl").read_text().splitlines()
    return {
        json.loads(line)["custom_id"]: json.loads(line)["response"]["body"]["usage"][
            "prompt_tokens"
        ]
        for line in output
    }


@pytest.mark.parametrize("spelling", ["text", "token ids"])
async def test_no_step_carries_a_batch_prompt_whole_and_the_results_are_the_same(
    tmp_path: Path, ledger: BatchLedger, spelling: str
) -> None:
    lines = [
        _completion(index, _text(index) if spelling == "text" else [index + 2] + [1] * (WORDS - 1))
        for index in range(LINES)
    ]
    pieces_per_line = len(piece_ends(WORDS, PIECE))  # 256, 512, 768
    results = {}
    for pieces in (0, PIECE):
        path = tmp_path / f"jobs-{pieces}.jsonl"
        _write(path, lines)
        with sim_serve(tmp_path, "max-num-seqs: 8\n") as sim:
            state, lane = await _run(path, ledger, f"http://127.0.0.1:{sim.port}", pieces)
            engine = _engine(sim.port)
        assert state is JobState.COMPLETED
        results[pieces] = (_answers(path), engine, lane)
    (whole, whole_engine, _), (cut, cut_engine, lane) = results[0], results[PIECE]
    # The lines' answers are the same: one each, the whole prompt's usage.
    assert whole == cut == {f"c{index}": WORDS for index in range(LINES)}
    # Whole, each prompt went in one step of ~1,000 tokens (the first two in one of ~2,000:
    # the lane started them together); in pieces, no step passed 512.
    assert whole_engine["steps_over_512"] >= LINES - 1, whole_engine
    assert cut_engine["steps_over_512"] == 0, cut_engine
    assert whole_engine["vllm:prefix_cache_hits_total"] == 0
    # Each piece and the line found the blocks the piece before left: 256 + 512 + 768.
    hits_per_line = sum(piece_ends(WORDS, PIECE))
    assert cut_engine["vllm:prefix_cache_hits_total"] == LINES * hits_per_line, cut_engine
    served = LINES * (1 + pieces_per_line)
    assert cut_engine["vllm:request_success_total"] == served
    # The pieces are the governor's own traffic too (taken out of the online signals).
    own = lane.tally.over(3600.0, asyncio.get_running_loop().time(), 0)
    assert own.requests_per_s * 3600.0 == pytest.approx(served)


async def test_chat_lines_and_short_prompts_go_whole(tmp_path: Path, ledger: BatchLedger) -> None:
    short = _completion(0, "a short prompt of a few words")
    chat: dict[str, object] = {
        "custom_id": "chat",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": MODEL, "messages": [{"role": "user", "content": _text(1)}]},
    }
    path = tmp_path / "jobs.jsonl"
    _write(path, [short, chat])
    with sim_serve(tmp_path, "") as sim:
        state, _lane = await _run(path, ledger, f"http://127.0.0.1:{sim.port}", PIECE)
        engine = _engine(sim.port)
    assert state is JobState.COMPLETED
    # The short one was answered; the simulated server has no chat endpoint (a 404 result).
    assert engine["vllm:request_success_total"] == 1
    assert engine["vllm:prefix_cache_hits_total"] == 0


async def test_a_piece_that_fails_ends_the_pieces_and_the_line_goes_as_it_is(
    tmp_path: Path, ledger: BatchLedger
) -> None:
    line = _completion(0, [7] * WORDS)
    line["body"]["cache_salt"] = "tenant-a"  # type: ignore[index]
    path = tmp_path / "jobs.jsonl"
    _write(path, [line])
    # The first piece meets a 503; the next request is the line's, answered 200.
    async with scripted([503]) as server:
        state, _ = await _run(path, ledger, f"http://127.0.0.1:{server.port}", PIECE)
    assert state is JobState.COMPLETED
    assert server.requests == 2
    piece, sent = (json.loads(body) for body in server.bodies)
    assert (len(piece["prompt"]), piece["max_tokens"]) == (PIECE, 1)
    # vLLM hashes the salt into every block's name: a piece without it would never be found.
    assert piece["cache_salt"] == "tenant-a"
    assert sent == line["body"]  # the line's own body, untouched (no priority: fcfs)
    output = path.with_name("jobs.output.jsonl").read_text().splitlines()
    assert [json.loads(row)["response"]["status_code"] for row in output] == [200]


async def test_a_server_without_the_prefix_cache_gets_the_prompts_whole(
    tmp_path: Path, ledger: BatchLedger, caplog: pytest.LogCaptureFixture
) -> None:
    # A piece's prefill would be thrown away and the line's request would prefill it again.
    path = tmp_path / "jobs.jsonl"
    _write(path, [_completion(index, _text(index)) for index in range(LINES)])
    with (
        caplog.at_level(logging.WARNING, logger="daemon.engine.batches.prefill_pieces"),
        sim_serve(tmp_path, "max-num-seqs: 8\nenable-prefix-caching: false\n") as sim,
    ):
        state, _ = await _run(path, ledger, f"http://127.0.0.1:{sim.port}", PIECE)
        engine = _engine(sim.port)
    assert state is JobState.COMPLETED
    assert _answers(path) == {f"c{index}": WORDS for index in range(LINES)}
    assert engine["vllm:request_success_total"] == LINES  # the lines, no piece
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1, warned  # once a job, not once a line
    assert 'enable_prefix_caching="False"' in warned[0]
    assert f"127.0.0.1:{sim.port}" in warned[0]


async def test_the_prefix_cache_is_read_from_cache_config_info() -> None:
    real = Path(__file__).parents[1] / "fixtures/vllm-metrics/real-0.32-cpu/idle.txt"
    assert prefix_caching_in(real.read_text()) is True
    off = 'vllm:cache_config_info{block_size="16",enable_prefix_caching="False",x="1"} 1.0\n'
    assert prefix_caching_in(off) is False
    # Not said: no info line, or one without the label (the pieces stay as configured).
    assert prefix_caching_in("vllm:num_requests_running 0.0\n") is None
    assert prefix_caching_in('vllm:cache_config_info{block_size="16"} 1.0\n') is None
    # Another label that ends with the name is not it.
    fake = 'vllm:cache_config_info{not_enable_prefix_caching="False"} 1.0\n'
    assert prefix_caching_in(fake) is None
    # A page the sources' reader refuses says nothing.
    assert prefix_caching_in('vllm:cache_config_info{enable_prefix_caching="False" oops\n') is None
