"""The batch lane's prefill in pieces on a real vLLM: its prefix cache finds each piece.

The lane asks ``/tokenize`` for a text prompt's ids, sends the leading 256, 512 and 768 of
them as one-token completions, then the line itself as text. If the ids ``/tokenize`` gives
were not the ones the completion reads, or the cache did not keep a piece's blocks, vLLM's
own ``prefix_cache_hits_total`` would say so: here it must grow by exactly what each request
found cached (256 + 512 + 768 tokens: whole blocks of 32).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
import uuid

import pytest

from daemon.batch.input_file import BatchLine
from daemon.core.http_client import HttpLimits, http_request
from daemon.engine.batches.prefill_pieces import PrefillPieces, piece_ends
from tests.support.real_vllm import EXACT, RealVllm

pytestmark = [pytest.mark.real_vllm, pytest.mark.slow, pytest.mark.timeout(600)]

PIECE = 256


def _counter(url: str, name: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(
        float(line.split()[-1]) for line in text.splitlines() if line.startswith(f"{name}{{")
    )


async def _prompt_of_about(url: str, tokens: int) -> str:
    """A text no earlier request began with, of ``tokens`` or a few fewer (as /tokenize counts)."""
    words = [uuid.uuid4().hex, *(f"w{n}" for n in range(tokens))]
    while True:
        text = " ".join(words)
        answer = await http_request(
            "POST",
            url + "/tokenize",
            HttpLimits(total_s=30.0, max_body_bytes=1 << 20),
            body=json.dumps({"model": EXACT["model"], "prompt": text}).encode(),
            headers={"Content-Type": "application/json"},
        )
        count = json.loads(answer.body)["count"]
        if count <= tokens:
            return text
        words = words[: max(1, len(words) * tokens // count - 1)]


@pytest.mark.asyncio
async def test_each_piece_and_the_line_find_the_piece_before_in_the_prefix_cache(
    server: RealVllm,
) -> None:
    prompt = await _prompt_of_about(server.url, 900)
    body = {**EXACT, "prompt": prompt, "max_tokens": 4}
    line = BatchLine(1, "c1", "/v1/completions", json.dumps(body).encode())
    answered: list[tuple[int, int]] = []
    pieces = PrefillPieces(
        server.url,
        PIECE,
        asyncio.Semaphore(1),
        120.0,
        priority=lambda: None,  # the tier's server runs fcfs
        tally=answered.append,
        exchange=http_request,
    )
    hits_before = _counter(server.url, "vllm:prefix_cache_hits_total")
    sent = await pieces.send_ahead(line)
    answer = await http_request(
        "POST",
        server.url + "/v1/completions",
        HttpLimits(total_s=120.0, max_body_bytes=1 << 20),
        body=line.body,
        headers={"Content-Type": "application/json"},
    )
    assert answer.status == 200, answer.body[:300]
    prompt_tokens = json.loads(answer.body)["usage"]["prompt_tokens"]
    assert 800 < prompt_tokens < 1000, prompt_tokens
    ends = list(piece_ends(prompt_tokens, PIECE))
    assert ends == [256, 512, 768]
    assert sent == len(ends)
    assert answered == [(end, 1) for end in ends]  # each piece's own usage, for the tally
    # vLLM's stats reach /metrics when its logger runs: give it a moment.
    found = 0.0
    for _ in range(50):
        found = _counter(server.url, "vllm:prefix_cache_hits_total") - hits_before
        if found >= sum(ends):
            break
        await asyncio.sleep(0.2)
    assert found == sum(ends), (found, ends)
