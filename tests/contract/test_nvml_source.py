"""The NVML source through the real nvidia-ml-py binding, against a stub libnvidia-ml.so.1.

In this process the stub is preloaded by path (``library_path``), as a configured path would
be; the binding keeps the first library it loads for the life of the process, so the tests
that need another library (or none) run in a fresh interpreter, the way the daemon runs.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pynvml
import pytest

from daemon.core.errors import SourceError
from daemon.sources.nvml_presence import nvml_library_missing
from daemon.sources.nvml_source import NvmlSource
from daemon.sources.polling import PollResult
from tests.support.nvml_stub import StubState

REPO = Path(__file__).resolve().parents[2]
LOGGER = "daemon.sources.nvml_source"
GIB = 1024**3

TWO_GPUS = {
    "driver_version": "550.54.15",
    "gpus": 2,
    "gpu0.name": "NVIDIA H100 80GB HBM3",
    "gpu0.uuid": "GPU-aaaa",
    "gpu0.memory_total": 80 * GIB,
    "gpu0.memory_used": 72 * GIB,
    "gpu0.utilization_gpu": 97,
    "gpu0.utilization_memory": 41,
    "gpu0.temperature": 71,
    "gpu0.power": 612_500,
    "gpu0.power_limit": 700_000,
    "gpu0.clock_reasons": 0x0,
    "gpu0.ecc": 0,
    "gpu1.uuid": "GPU-bbbb",
    "gpu1.ecc": "unsupported",
    "gpu1.xids": "unsupported",
}


@pytest.fixture
def stub_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StubState:
    state = StubState(tmp_path / "nvml.state")
    state.set(TWO_GPUS)
    monkeypatch.setenv("NVML_STUB_STATE", str(state.path))
    return state


def _values(result: PollResult, gpu: str) -> dict[str, float]:
    """One GPU's values by name, with ``reason`` folded in: ``gpu_throttle_active/hw_slowdown``."""
    values = {}
    for sample in result.samples:
        if sample.key.label("gpu") == gpu:
            reason = sample.key.label("reason")
            values[sample.key.name + (f"/{reason}" if reason else "")] = sample.value
    return values


@pytest.mark.asyncio
async def test_values_come_through_the_binding_in_base_units(
    nvml_stub: Path, stub_state: StubState
) -> None:
    async with NvmlSource(1.0, 5.0, str(nvml_stub)) as source:
        result = await source.poll(12.5)
    assert result.detail == ""
    assert {(s.at, s.source) for s in result.samples} == {(12.5, "nvml")}
    first = next(s for s in result.samples if s.key.name == "gpu_memory_used_bytes")
    assert dict(first.key.labels) == {
        "gpu": "0",
        "uuid": "GPU-aaaa",
        "name": "NVIDIA H100 80GB HBM3",
    }
    assert _values(result, "0") == {
        "gpu_memory_used_bytes": 72 * GIB,
        "gpu_memory_total_bytes": 80 * GIB,
        "gpu_utilization_ratio": 0.97,
        "gpu_memory_utilization_ratio": 0.41,
        "gpu_temperature_celsius": 71.0,
        "gpu_power_watts": 612.5,
        "gpu_power_limit_watts": 700.0,
        "gpu_throttle_reasons_bitmask": 0.0,
        "gpu_throttle_active/sw_power_cap": 0.0,
        "gpu_throttle_active/hw_slowdown": 0.0,
        "gpu_throttle_active/sw_thermal_slowdown": 0.0,
        "gpu_throttle_active/hw_thermal_slowdown": 0.0,
        "gpu_throttle_active/hw_power_brake": 0.0,
        "gpu_ecc_uncorrected_errors_total": 0.0,
        "gpu_xid_errors_total": 0.0,
    }


@pytest.mark.asyncio
async def test_changes_between_polls_are_seen_and_xids_counted(
    nvml_stub: Path, stub_state: StubState, caplog: pytest.LogCaptureFixture
) -> None:
    stub_state.set({"gpu0.xids": "13"})  # raised before the source watched: not counted
    async with NvmlSource(1.0, 5.0, str(nvml_stub)) as source:
        before = _values(await source.poll(1.0), "0")
        caplog.set_level(logging.WARNING, logger=LOGGER)
        stub_state.set(
            {
                "gpu0.temperature": 88,
                "gpu0.power": 700_000,
                "gpu0.clock_reasons": 0x44,  # sw power cap + hw thermal slowdown
                "gpu0.ecc": 2,
                "gpu0.xids": "13,79,48",
            }
        )
        after = _values(await source.poll(2.0), "0")
    assert before["gpu_xid_errors_total"] == 0.0
    assert after["gpu_temperature_celsius"] == 88.0
    assert after["gpu_power_watts"] == 700.0
    assert after["gpu_throttle_reasons_bitmask"] == 0x44
    active = {name for name, value in after.items() if name.startswith("gpu_throttle_active/")}
    assert {name for name in active if after[name] == 1.0} == {
        "gpu_throttle_active/sw_power_cap",
        "gpu_throttle_active/hw_thermal_slowdown",
    }
    assert after["gpu_ecc_uncorrected_errors_total"] == 2.0
    assert after["gpu_xid_errors_total"] == 2.0
    assert [(r.getMessage(), getattr(r, "xid", None)) for r in caplog.records] == [
        ("GPU XID error", 79),
        ("GPU XID error", 48),
    ]


@pytest.mark.asyncio
async def test_unsupported_readings_are_skipped_for_that_gpu_and_not_retried(
    nvml_stub: Path, stub_state: StubState, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    async with NvmlSource(1.0, 5.0, str(nvml_stub)) as source:
        first = await source.poll(1.0)
        stub_state.set({"gpu1.ecc": 3})  # a reading once skipped stays skipped
        second = await source.poll(2.0)
        third = await source.poll(3.0)
    for result in (first, second, third):
        assert result.detail == ""
        gpu1 = _values(result, "1")
        assert "gpu_ecc_uncorrected_errors_total" not in gpu1
        assert "gpu_xid_errors_total" not in gpu1
        assert gpu1["gpu_temperature_celsius"] == 40.0  # the stub's default
        assert "gpu_ecc_uncorrected_errors_total" in _values(result, "0")
    skipped = [r for r in caplog.records if r.getMessage() == "GPU reading unsupported"]
    assert [(getattr(r, "gpu", None), getattr(r, "reading", None)) for r in skipped] == [(1, "ecc")]


@pytest.mark.asyncio
async def test_other_nvml_errors_fail_the_poll_and_it_recovers(
    nvml_stub: Path, stub_state: StubState
) -> None:
    async with NvmlSource(1.0, 5.0, str(nvml_stub)) as source:
        stub_state.set({"gpu0.temperature": "gpu_lost"})
        with pytest.raises(SourceError, match="temperature of GPU 0: GPU is lost") as failed:
            await source.poll(1.0)
        assert failed.value.detail == "nvml-error"
        assert isinstance(failed.value.__cause__, pynvml.NVMLError_GpuIsLost)
        stub_state.set({"gpu0.temperature": 65})
        assert _values(await source.poll(2.0), "0")["gpu_temperature_celsius"] == 65.0


@pytest.mark.asyncio
async def test_a_failed_initialisation_is_retried_at_each_poll(
    nvml_stub: Path, stub_state: StubState
) -> None:
    stub_state.set({"init": "unknown"})
    async with NvmlSource(1.0, 5.0, str(nvml_stub)) as source:
        with pytest.raises(SourceError) as failed:
            await source.poll(1.0)
        assert failed.value.detail == "nvml-init"
        stub_state.set({"init": "ok"})
        assert _values(await source.poll(2.0), "1")["gpu_power_limit_watts"] == 700.0


@pytest.mark.asyncio
@pytest.mark.parametrize("no_driver", ["driver_not_loaded", "missing_library"])
async def test_without_a_driver_one_message_then_nothing(
    no_driver: str,
    nvml_stub: Path,
    stub_state: StubState,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    library = str(nvml_stub)
    if no_driver == "driver_not_loaded":
        stub_state.set({"init": "driver_not_loaded"})
    else:
        library = str(tmp_path / "absent" / "libnvidia-ml.so.1")
    async with NvmlSource(1.0, 5.0, library) as source:
        results = [await source.poll(float(now)) for now in range(5)]
    assert results == [PollResult((), "no-driver")] * 5
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "no NVIDIA driver: NVML signals disabled")
    ]


def _probe(library_path: Path | None, **environment: str) -> dict[str, Any]:
    """What an NvmlSource sees in a fresh interpreter with exactly this NVML environment."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"LD_LIBRARY_PATH", "LD_PRELOAD", "NVML_STUB_STATE"}
    }
    env.update(environment)
    command = [sys.executable, "-c", "from tests.support.nvml_probe import main; main()"]
    if library_path is not None:
        command.append(str(library_path))
    done = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _probe_values(report: dict[str, Any], gpu: str) -> dict[str, float]:
    last = report["polls"][-1]["samples"]
    return {
        name + (f"/{labels['reason']}" if "reason" in labels else ""): value
        for name, labels, value in last
        if labels["gpu"] == gpu
    }


def test_a_fresh_process_finds_the_library_by_its_soname(
    nvml_stub: Path, stub_state: StubState
) -> None:
    report = _probe(
        None, LD_LIBRARY_PATH=str(nvml_stub.parent), NVML_STUB_STATE=str(stub_state.path)
    )
    values = _probe_values(report, "0")
    assert values["gpu_memory_used_bytes"] == 72 * GIB
    assert values["gpu_power_watts"] == 612.5
    assert "gpu_ecc_uncorrected_errors_total" in values
    assert report["ecc_error"] is None
    assert "INFO NVML ready" in report["logs"]


def test_symbols_an_older_driver_lacks_are_function_not_found_and_skipped(
    nvml_stub_old_driver: Path, stub_state: StubState
) -> None:
    stub_state.set({"gpu0.clock_reasons": 0x04, "gpu0.ecc": 1})
    report = _probe(
        None,
        LD_LIBRARY_PATH=str(nvml_stub_old_driver.parent),
        NVML_STUB_STATE=str(stub_state.path),
    )
    assert report["ecc_error"] == "NVMLError_FunctionNotFound"
    for poll in report["polls"]:
        assert poll["detail"] == ""
    values = _probe_values(report, "0")
    assert "gpu_ecc_uncorrected_errors_total" not in values
    # ...ClocksEventReasons is missing too: the older ...ThrottleReasons answers instead.
    assert values["gpu_throttle_reasons_bitmask"] == 0x04
    assert values["gpu_throttle_active/sw_power_cap"] == 1.0
    assert report["logs"].count("INFO GPU reading unsupported") == 2  # ecc on each GPU


def test_a_process_without_any_nvidia_library_reports_no_driver(tmp_path: Path) -> None:
    report = _probe(None)
    if report["polls"][0]["detail"] != "no-driver":
        pytest.skip("this machine has an NVIDIA driver")
    assert report["polls"] == [{"detail": "no-driver", "samples": []}] * 2
    assert report["logs"] == ["WARNING no NVIDIA driver: NVML signals disabled"]
    missing = _probe(tmp_path / "libnvidia-ml.so.1")
    assert missing["polls"] == report["polls"]
    assert missing["logs"] == report["logs"]


def test_presence_probe_finds_the_stub_and_explains_a_missing_library(
    nvml_stub: Path, tmp_path: Path
) -> None:
    assert nvml_library_missing(str(nvml_stub)) is None
    reason = nvml_library_missing(str(tmp_path / "libnvidia-ml.so.1"))
    assert reason is not None
    assert "No such file" in reason
