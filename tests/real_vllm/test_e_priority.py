"""``--scheduling-policy`` on the real vLLM, and the simulator's model of it on the same scenes.

Each policy gets a server of its own (24 KV blocks of 32 tokens, two sequences at a time), and
the same scene is played on it and, in virtual time, on the simulator with the
``tiny-llama-cpu`` profile at the same settings:

- **KV shortage.** A batch request (priority 10) and then an online one (priority 0), each
  20 + 620 tokens (20 blocks): both cannot finish together, and when the pool runs out one
  of them is preempted. Priority preempts the least urgent, the batch one (and the online one
  finishes first); FCFS preempts the newest, the online one (and the batch one finishes
  first). On the real server the online request is sent when the batch one streams its first
  token, not at a fixed time: sent half a second later, it met a batch request already more
  than 256 tokens ahead on a quiet machine, the two fitted in 12 blocks, and nothing was
  preempted (two CI runs failed so, one per policy; the scene was then half as long as now).
  The simulator, in virtual time, sends it half a second later.
  Whom the real engine preempted is read from its own KV cache events (``--kv-events-config``
  with a replay endpoint, :mod:`tests.support.kv_events_replay`): preemption happens when no
  block is free, so the first cached blocks of the scene that the engine evicts are the
  victim's. Each request's prompt is one token repeated, a token of its own in each playing,
  so the first block of each chain names its request. The order in which the client saw the
  answers end was read before, and it is the engine's only when vLLM's front end keeps up:
  on CI it handed both ends over in one go, 0-37 ms apart in either order, in eight playings
  of eight. A playing in which nothing was preempted (one in five on a quiet machine) is
  played again, eight times at most.
The queue-order scene (a long request holding one slot while batch and online requests queue
for the other) is played on the simulator only (tests/unit/simulator): on the real server its
outcome depended on the machine's speed. On a quiet machine the long request ended before the
queue formed, and every batch request was served before the online ones arrived.

Under FCFS a non-zero priority is accepted (HTTP 200) and ignored.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from simulator.arrivals import Arrival
from simulator.engine import Engine
from simulator.profiles import load_profile
from simulator.settings import EngineSettings, SchedulingPolicy
from simulator.virtual_time import VirtualRun
from tests.support.real_vllm import EXACT, RealVllm, real_vllm

# Each policy's server starts once (45-200 s on two busy cores), in the first test's time.
pytestmark = [pytest.mark.real_vllm, pytest.mark.slow, pytest.mark.timeout(600)]

SETTINGS = {
    "max_num_seqs": 2,
    "max_num_batched_tokens": 2048,
    "block_size": 32,
    "num_gpu_blocks": 24,
}
CONFIG = (
    "max-num-seqs: 2\nmax-num-batched-tokens: 2048\n"
    "block-size: 32\nnum-gpu-blocks-override: 24\nmax-model-len: 704\n"
)


@dataclass(frozen=True)
class Send:
    """One request of a scene: sent ``at`` seconds after the scene starts."""

    name: str
    at: float
    prompt_tokens: int
    max_tokens: int
    priority: int


KV_SHORTAGE = [Send("batch", 0.0, 20, 620, 10), Send("online", 0.5, 20, 620, 0)]
PLAYINGS = 8
REPLAY = Path(__file__).parents[1] / "support/kv_events_replay.py"
# A prompt token of its own for each request of each playing (ids the tiny model knows).
PROMPT_TOKENS = count(100)


@dataclass(frozen=True)
class PolicyServer:
    """A real vLLM running ``policy``, with the endpoint that replays its KV cache events."""

    policy: str
    server: RealVllm
    replay: str


def _kv_events(directory: Path) -> str:
    # ipc endpoints: vLLM binds those (a tcp one without a wildcard it would connect to).
    config = {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": f"ipc://{directory}/kv-events",
        "replay_endpoint": f"ipc://{directory}/kv-replay",
    }
    return f"kv-events-config: '{json.dumps(config)}'\n"


@pytest.fixture(scope="module", params=["priority", "fcfs"])
def policy_server(request: pytest.FixtureRequest) -> Iterator[PolicyServer]:
    policy = str(request.param)
    with tempfile.TemporaryDirectory(prefix=f"vg-real-{policy}-") as name:
        directory = Path(name)
        config = f"{CONFIG}scheduling-policy: {policy}\n{_kv_events(directory)}"
        with real_vllm(directory, config) as running:
            yield PolicyServer(policy, running, f"ipc://{directory}/kv-replay")


def _preemptions(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("vllm:num_preemptions_total")
    )


@dataclass(frozen=True)
class Playing:
    """One playing of a scene on the real server."""

    victim: str | None  # whose cached blocks the engine evicted first; None: nobody's
    preemptions: float


def _stream(url: str, body: dict[str, Any], first_token: threading.Event) -> tuple[int, int]:
    """POST a streamed completion; set ``first_token`` when its first text arrives.

    The status and the completion tokens.
    """
    data = json.dumps(
        {**EXACT, **body, "stream": True, "stream_options": {"include_usage": True}}
    ).encode()
    request = urllib.request.Request(
        f"{url}/v1/completions", data=data, headers={"Content-Type": "application/json"}
    )
    completion_tokens = -1
    with urllib.request.urlopen(request, timeout=120) as answer:
        for raw in answer:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line.removeprefix("data: "))
            if chunk.get("choices"):
                first_token.set()
            if chunk.get("usage"):
                completion_tokens = chunk["usage"]["completion_tokens"]
        return answer.status, completion_tokens


def _kv_events_of(target: PolicyServer) -> list[dict[str, Any]]:
    """Every KV cache event the server still buffers, in the engine's order."""
    result = subprocess.run(
        [str(target.server.python), str(REPLAY), target.replay],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return [json.loads(line) for line in result.stdout.splitlines()]


def _victim(events: list[dict[str, Any]], first_tokens: dict[int, str]) -> str | None:
    """The request whose cached blocks were evicted first, by the first token of each chain."""
    owner: dict[str, str] = {}
    for event in events:
        if "stored" in event:
            parent = event["parent"]
            name = first_tokens.get(event["tokens"][0]) if parent is None else owner.get(parent)
            if name is not None:
                owner.update(dict.fromkeys(event["stored"], name))
            continue
        evicted = [owner[block] for block in event["removed"] if block in owner]
        if evicted:
            return evicted[0]
    return None


def _real_scene(target: PolicyServer, scene: list[Send]) -> Playing:
    """Whom the engine preempted, and the preemptions it counted meanwhile.

    Each request after the first is sent when the one before it streams its first token.
    """
    url = target.server.url
    before = _preemptions(url)
    prompt_token = {send.name: next(PROMPT_TOKENS) for send in scene}
    answers: dict[str, tuple[int, int]] = {}

    def client(send: Send, first_token: threading.Event) -> None:
        body = {"prompt": [prompt_token[send.name]] * send.prompt_tokens,
                "max_tokens": send.max_tokens, "priority": send.priority}  # fmt: skip
        answers[send.name] = _stream(url, body, first_token)

    threads = []
    for send in scene:
        first_token = threading.Event()
        threads.append(threading.Thread(target=client, args=(send, first_token), name=send.name))
        threads[-1].start()
        assert first_token.wait(timeout=120), f"{send.name} streamed no token"
    for thread in threads:
        thread.join(timeout=180)
    assert answers == {send.name: (200, send.max_tokens) for send in scene}
    first_tokens = {token: name for name, token in prompt_token.items()}
    return Playing(_victim(_kv_events_of(target), first_tokens), _preemptions(url) - before)


def _simulated_scene(policy: str, scene: list[Send]) -> tuple[list[str], list[str]]:
    """The names in the order they finished, and those preempted, in virtual time."""
    profile = load_profile("tiny-llama-cpu")
    settings = EngineSettings.defaults(
        profile, scheduling_policy=SchedulingPolicy(policy), **SETTINGS
    )
    arrivals = [Arrival(s.at, s.prompt_tokens, s.max_tokens, s.priority) for s in scene]
    run = VirtualRun(Engine(profile, settings), arrivals)
    run.run()
    names = {f"cmpl-{index}": send.name for index, send in enumerate(scene)}
    records = sorted(run.finished, key=lambda record: record.finished_at)
    preempted = [names[r.request_id] for r in records if r.num_preemptions > 0]
    return [names[r.request_id] for r in records], preempted


def test_under_kv_shortage_the_policy_chooses_whom_to_preempt(policy_server: PolicyServer) -> None:
    victim = "batch" if policy_server.policy == "priority" else "online"
    playings = [_real_scene(policy_server, KV_SHORTAGE)]
    while playings[-1].victim is None and len(playings) < PLAYINGS:
        playings.append(_real_scene(policy_server, KV_SHORTAGE))
    real = playings[-1]
    assert real.victim == victim, playings
    assert real.preemptions >= 1, playings
    order, preempted = _simulated_scene(policy_server.policy, KV_SHORTAGE)
    assert preempted == [victim], ("simulated", preempted)
    survivor = next(send.name for send in KV_SHORTAGE if send.name != victim)
    assert order == [survivor, victim], ("simulated", order)
