"""The whole Governor, in-process, in virtual time, against the simulated vLLM it governs.

The daemon's own composition (signal plane scraping over HTTP, policy plane, evaluator,
router, actuation runner, approvals, control socket) and ``sim serve``'s own server run on one
:class:`~daemon.core.virtual_time.VirtualTimeLoop`: minutes of both pass in about a second, with
nothing copied and nothing mocked but the actuator, the one port whose real adapter restarts a
process (it records the change here). No test here sleeps for real.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from actuators.kinds import VLLM
from daemon.core.config_files import load_config
from daemon.core.virtual_time import EPOCH, VirtualClock, run_in_virtual_time
from daemon.engine.governor import Governor, LoadedConfig
from daemon.engine.runtime.service_manager import NoServiceManager
from daemon.engine.storage.state_db import STATE_FILE
from daemon.engine.storage.state_store import StateStore
from simulator.server.options import ServeOptions, resolve
from simulator.server.process import serve
from tests.support.daemon import write_config
from tests.support.retune import write_policy
from tests.support.services import free_port
from tests.support.slack_double.approvals_rig import RecordingActuator
from tests.support.supervised_sim import MODEL, PROFILE, SATURATING_WORKLOAD

RUN_S = 300.0


def _configure(directory: Path, port: int) -> Path:
    (directory / "policies").mkdir()
    server = f"""
[[vllm]]
name = "sim"
url = "http://127.0.0.1:{port}"
scrape_interval_s = 2.0
config_path = "{directory / "vllm.yaml"}"
unit = "sim.service"
[vllm.knobs.max_num_seqs]
min = 4
max = 32
max_step = 32
min_dwell_s = 0
hourly_budget = 5
"""
    config = write_config(directory, extra=server)
    text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{directory}/policies"]')
    text = text.replace("[metrics]\n", "[metrics]\nenabled = false\n")
    config.write_text(text + "[sources.nvml]\nenabled = false\n[sources.host]\nenabled = false\n")
    # Doubles max_num_seqs once more than two requests have waited for 30 s (the pack's `for`).
    write_policy(directory, "waiting > 2.0")
    policy = directory / "policies" / "more-seqs.yaml"
    policy.write_text(policy.read_text().replace("when:", "for: 30s\nwhen:"))
    return config


def test_the_governor_retunes_a_saturated_simulated_server_in_virtual_time(
    short_tmp: Path,
) -> None:
    port = free_port()
    (short_tmp / "vllm.yaml").write_text(f"served-model-name: {MODEL}\nmax-num-seqs: 8\n")
    (short_tmp / "load.yaml").write_text(SATURATING_WORKLOAD)
    plan = resolve(
        ServeOptions(
            config=short_tmp / "vllm.yaml",
            profile=PROFILE,
            port=port,
            load=str(short_tmp / "load.yaml"),
            loading_s=0.5,
        )
    )
    config_path = _configure(short_tmp, port)
    actuator = RecordingActuator(short_tmp / "state")

    async def main() -> float | None:
        loop = asyncio.get_running_loop()
        clock = VirtualClock(loop, EPOCH)
        loaded = LoadedConfig(load_config(config_path), config_path, clock.wall())
        kinds = (replace(VLLM, factory=lambda _services: actuator),)
        governor = Governor(loaded, clock, NoServiceManager(), kinds=kinds)
        stop_server = asyncio.Event()
        applied_at: float | None = None
        async with asyncio.TaskGroup() as group:
            group.create_task(serve(plan, stop_server), name="sim serve")
            governing = group.create_task(governor.run(), name="governor")
            while loop.time() < RUN_S:
                await asyncio.sleep(1.0)
                if applied_at is None and actuator.applied:
                    applied_at = loop.time()
            governor.request_stop()
            await governing
            stop_server.set()
        return applied_at

    applied_at = run_in_virtual_time(main())
    assert [request.changes for request in actuator.applied] == [{"max_num_seqs": 16.0}]
    # The queue builds within seconds of the load; the policy waits out its 30 s first.
    assert applied_at is not None
    assert 30.0 <= applied_at <= 60.0, applied_at
    # The decision log, on the virtual wall clock: the intent, with the waiting it saw over
    # HTTP, the moment the condition had held 30 s.
    store = StateStore(short_tmp / "state" / STATE_FILE)
    decisions = store.recent_decisions(100)
    store.close()
    (intent,) = [d for d in decisions if d["kind"] == "intent"]
    assert intent["policy"] == "more-seqs"
    assert intent["evidence"]["signals"]["waiting"] > 2.0
    acted_s = intent["at"] - EPOCH.timestamp()
    assert 30.0 <= acted_s <= applied_at, acted_s
