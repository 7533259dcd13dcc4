"""Replay a list of arrivals against a real vLLM, open loop, and time every request as a client.

Each arrival is sent at its own time from the start (however the server is doing, as the
simulator's workloads arrive), as a streamed completion of exactly ``prompt_tokens`` random
token ids and ``output_tokens`` generated tokens (``ignore_eos``). Random ids make every
prompt distinct, so no prefix is shared. The client records when the request was sent, when
the first token and the last token came, and how many tokens came, so that TTFT and TPOT are
what a user of the server would see, with the simulator's definitions:
``tpot = (e2e - ttft) / (output_tokens - 1)``.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp

from simulator.arrivals import Arrival

# Ids 0-2 are the tokenizer's special tokens; the tiny model's vocabulary has 2048.
_FIRST_ID = 3
_VOCABULARY = 2048
_REQUEST_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class ClientRecord:
    """One request as the client saw it.

    Attributes:
        arrived_at: When it was sent (s from the start of the replay).
        lag_s: How late it was sent against its arrival time (the client's own delay).
        ttft_s: Sent to first token, or None when it failed.
        e2e_s: Sent to last token, or None when it failed.
        output_tokens: Tokens received (the usage chunk's count).
        chunks: Stream chunks that carried tokens: fewer than the tokens when the API server
            fell behind the engine and merged a request's pending tokens into one chunk.
        error: What went wrong, or None.
    """

    arrived_at: float
    lag_s: float
    ttft_s: float | None
    e2e_s: float | None
    output_tokens: int
    chunks: int = 0
    error: str | None = None

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first, or None (failed, or a one-token output)."""
        if self.ttft_s is None or self.e2e_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def finished_at(self) -> float | None:
        """When the last token came (s from the start), or None."""
        return None if self.e2e_s is None else self.arrived_at + self.e2e_s


def replay(url: str, arrivals: Sequence[Arrival], *, seed: int = 0) -> list[ClientRecord]:
    """Send every arrival at its time and wait for all of them; records in arrival order."""
    return asyncio.run(_replay(url, arrivals, seed))


async def _replay(url: str, arrivals: Sequence[Arrival], seed: int) -> list[ClientRecord]:
    # Not cryptography: reproducible prompt contents.
    rng = random.Random(f"{seed}/prompt-ids")
    prompts = [
        [rng.randrange(_FIRST_ID, _VOCABULARY) for _ in range(arrival.prompt_tokens)]
        for arrival in arrivals
    ]
    # No connection cap: a burst must reach the server as it would from many clients.
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=_REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        started = time.perf_counter()
        tasks = [
            asyncio.create_task(_one(session, url, arrival, prompt, started))
            for arrival, prompt in zip(arrivals, prompts, strict=True)
        ]
        return list(await asyncio.gather(*tasks))


async def _one(
    session: aiohttp.ClientSession,
    url: str,
    arrival: Arrival,
    prompt: list[int],
    started: float,
) -> ClientRecord:
    delay = started + arrival.arrived_at - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)
    sent = time.perf_counter()
    arrived_at = sent - started
    lag = arrived_at - arrival.arrived_at
    body = {
        "model": "tiny",
        "prompt": prompt,
        "max_tokens": arrival.output_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    first: float | None = None
    tokens = 0
    chunks = 0
    try:
        async with session.post(f"{url}/v1/completions", json=body) as response:
            if response.status != 200:
                error = f"HTTP {response.status} {(await response.text())[:200]}"
                return ClientRecord(arrived_at, lag, None, None, 0, error=error)
            async for line in response.content:
                if not line.startswith(b"data: {"):
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("choices"):
                    chunks += 1
                    if first is None:
                        first = time.perf_counter()
                usage = chunk.get("usage")
                if usage:
                    tokens = int(usage["completion_tokens"])
    except (aiohttp.ClientError, TimeoutError) as exc:
        return ClientRecord(arrived_at, lag, None, None, 0, error=f"{type(exc).__name__}: {exc}")
    ended = time.perf_counter()
    if first is None:
        return ClientRecord(arrived_at, lag, None, None, 0, error="no token came")
    return ClientRecord(arrived_at, lag, first - sent, ended - sent, tokens, chunks)
