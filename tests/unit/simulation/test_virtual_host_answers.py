"""A client's own request on the virtual host is answered when its step ends, not at the next look.

The batch lane sends a long prompt's pieces one after another; an answer that waited for the
next scrape or tick (0.2 s in the governed day) would cost each piece that wait, on a server
that answers in one step.
"""

from __future__ import annotations

import asyncio
from itertools import pairwise
from pathlib import Path

from daemon.core.virtual_time import run_in_virtual_time
from simulator.engine import Engine
from simulator.profiles import load_profile
from simulator.requests import Outcome
from simulator.server.virtual_host import VirtualHost, engine_settings_yaml
from simulator.settings import EngineSettings
from simulator.virtual_time import VirtualRun


def test_one_after_another_each_answer_comes_at_its_steps_end(tmp_path: Path) -> None:
    profile = load_profile("llama-3.1-8b-h100-tp1")
    settings = EngineSettings.defaults(profile)
    config = tmp_path / "vllm.yaml"
    config.write_text(engine_settings_yaml(settings), encoding="utf-8")

    async def pieces() -> list[tuple[float, float]]:
        run = VirtualRun(Engine(profile, settings), [])
        host = VirtualHost(run, profile, config, 0.0, tmp_path / "server.log")
        loop = asyncio.get_running_loop()
        seen = []
        for end in (256, 512, 768):
            _, answer = host.submit(end, 1, priority=1000, token_ids=list(range(end)))
            # Nobody else looks at the host: no scrape, no tick.
            record = await asyncio.wait_for(answer, timeout=10.0)
            assert record.outcome is Outcome.COMPLETED
            seen.append((record.finished_at, loop.time()))
        return seen

    seen = run_in_virtual_time(pieces())
    for finished_at, answered_at in seen:
        # At its step's end: not before (the run computes a step whole), not a tick later.
        assert abs(answered_at - finished_at) < 1e-9, seen
    # Sent at the answer before it, each piece is one step of 256 new tokens (10.2 ms: it
    # found the piece before it in the prefix cache), not of 512 or 768 (14.6, 19.0 ms).
    steps = [later[0] - earlier[0] for earlier, later in pairwise(seen)]
    assert max(steps) < 0.0115, seen
