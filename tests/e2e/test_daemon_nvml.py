"""The daemon reading GPUs through the real nvidia-ml-py binding and the stub library."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from daemon.app.control_client import call_daemon
from tests.support.daemon import running_daemon, write_config
from tests.support.nvml_stub import StubState, build_stub

ONE_GPU = {
    "gpus": 1,
    "gpu0.uuid": "GPU-e2e",
    "gpu0.memory_total": 80 << 30,
    "gpu0.memory_used": 70 << 30,
    "gpu0.temperature": 66,
    "gpu0.power": 500_000,
    "gpu0.power_limit": 700_000,
}


def _gpu(socket: Path) -> dict[str, Any]:
    answer = call_daemon(socket, "signals", prefix="gpu_temperature_celsius")
    nvml = next(entry for entry in answer["sources"] if entry["source"] == "nvml")
    rows = answer["signals"]
    return {"source": nvml, "row": rows[0] if rows else None}


def _wait(condition: Any, socket: Path, timeout_s: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        seen = _gpu(socket)
        if condition(seen):
            return seen
        time.sleep(0.1)
    raise AssertionError(f"not reached: last seen {seen}")


def test_gpu_signals_flow_and_a_lost_gpu_marks_them_stale(short_tmp: Path) -> None:
    library = build_stub(short_tmp / "nvml")
    state = StubState(short_tmp / "nvml.state")
    state.set(ONE_GPU)
    extra = (
        "[sources.nvml]\n"
        f'library_path = "{library}"\n'
        "interval_s = 0.2\ntimeout_s = 2.0\nstale_after_s = 1.0\n"
    )
    config = write_config(short_tmp, extra=extra)
    socket = short_tmp / "control.sock"
    with running_daemon(config, env={"NVML_STUB_STATE": str(state.path)}) as daemon:
        daemon.wait_for("READY=1")
        seen = _wait(lambda s: s["row"] and s["row"]["state"] == "ok", socket)
        assert seen["row"]["value"] == 66
        assert seen["row"]["labels"]["uuid"] == "GPU-e2e"

        state.set({"gpu0.temperature": "gpu_lost"})
        seen = _wait(lambda s: s["row"]["state"] == "stale", socket)
        assert seen["source"]["state"] == "down"
        assert daemon.process.poll() is None

        state.set({"gpu0.temperature": 70})
        seen = _wait(lambda s: s["row"]["state"] == "ok" and s["row"]["value"] == 70, socket)
        assert seen["source"]["state"] == "up"
