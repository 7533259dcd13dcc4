"""Replay a list of arrivals against a real vLLM, open loop, and time every request as a client.

Each arrival is sent at its own time from the start (however the server is doing, as the
simulator's workloads arrive), from a thread of its own, as a streamed completion of exactly
``prompt_tokens`` random token ids and ``output_tokens`` generated tokens (``ignore_eos``).
Random ids make every prompt distinct, so no prefix is shared. The client records when the
request was sent, when the first token and the last token came, and how many tokens came, so
that TTFT and TPOT are what a user of the server would see, with the simulator's definitions:
``tpot = (e2e - ttft) / (output_tokens - 1)``.

Why threads and blocking sockets rather than one event loop: on two cores shared with the
server, a ``send`` on loopback was seen (profiled) to take 18 ms on average and up to a second.
In one event loop every such stall delays every other request's send and token stamps: the
first version of this client sent up to 5 s late. A thread per request stalls only itself.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from simulator.arrivals import Arrival

# Ids 0-2 are the tokenizer's special tokens; the tiny model's vocabulary has 2048.
_FIRST_ID = 3
_VOCABULARY = 2048
_REQUEST_TIMEOUT_S = 120.0
CLIENT_NICENESS = -10
_COMPLETION_TOKENS = re.compile(rb'"completion_tokens":\s*(\d+)')


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
    """Send every arrival at its time and wait for all of them; records in arrival order.

    The client runs at a higher CPU priority than the server (niceness -10, when allowed):
    it stands for users on other machines, and a starved client would send late and stamp
    tokens late, measuring itself rather than the server. With the kernel's autogroups (one
    scheduling group per session, on by default) a thread's niceness counts only inside its
    own session, so the session's group is given the niceness too, for the replay only.
    """
    # Not cryptography: reproducible prompt contents.
    rng = random.Random(f"{seed}/prompt-ids")
    bodies = [
        json.dumps(
            {
                "model": "tiny",
                "prompt": [
                    rng.randrange(_FIRST_ID, _VOCABULARY) for _ in range(arrival.prompt_tokens)
                ],
                "max_tokens": arrival.output_tokens,
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        ).encode()
        for arrival in arrivals
    ]
    host, port = url.removeprefix("http://").split(":")
    records: list[ClientRecord | None] = [None] * len(arrivals)
    started = time.perf_counter()

    def send(index: int) -> None:
        records[index] = _one(host, int(port), arrivals[index], bodies[index], started)

    threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(len(arrivals))]
    with _autogroup_niceness(CLIENT_NICENESS):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return [record for record in records if record is not None]


@contextlib.contextmanager
def _autogroup_niceness(niceness: int) -> Iterator[None]:
    """Run the block with this session's scheduling group at ``niceness``, where allowed."""
    autogroup = Path("/proc/self/autogroup")
    try:
        previous = int(autogroup.read_text().split("nice")[1])
        autogroup.write_text(str(niceness))
    except (OSError, IndexError, ValueError):
        yield
        return
    try:
        yield
    finally:
        autogroup.write_text(str(previous))


def _one(host: str, port: int, arrival: Arrival, body: bytes, started: float) -> ClientRecord:
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, 0, CLIENT_NICENESS)  # this thread only, on Linux
    delay = started + arrival.arrived_at - time.perf_counter()
    if delay > 0:
        time.sleep(delay)
    sent = time.perf_counter()
    arrived_at = sent - started
    lag = arrived_at - arrival.arrived_at
    first: float | None = None
    chunks = 0
    tail = b""
    connection = http.client.HTTPConnection(host, port, timeout=_REQUEST_TIMEOUT_S)
    try:
        connection.request(
            "POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        if response.status != 200:
            error = f"HTTP {response.status} {response.read()[:200]!r}"
            return ClientRecord(arrived_at, lag, None, None, 0, error=error)
        while block := response.read1(65536):
            token_chunks = block.count(b"data: {") - block.count(b'"choices":[]')
            if token_chunks > 0:
                chunks += token_chunks
                if first is None:
                    first = time.perf_counter()
            tail = (tail + block)[-600:]
    except (OSError, http.client.HTTPException) as exc:
        return ClientRecord(arrived_at, lag, None, None, 0, error=f"{type(exc).__name__}: {exc}")
    finally:
        connection.close()
    ended = time.perf_counter()
    if first is None:
        return ClientRecord(arrived_at, lag, None, None, 0, error="no token came")
    found = _COMPLETION_TOKENS.search(tail)
    tokens = int(found.group(1)) if found else chunks
    return ClientRecord(arrived_at, lag, first - sent, ended - sent, tokens, chunks)
