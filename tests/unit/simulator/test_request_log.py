"""The simulated server's log: vLLM's level from the environment, a line per request taken."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from simulator.engine import Engine
from simulator.profiles import EngineProfile
from simulator.server.clock import LoopClock
from simulator.server.driver import RealTimeDriver
from simulator.server.options import ServeOptions, resolve
from simulator.server.request_log import (
    PREFIX_BYTES,
    logging_level,
    request_line,
    request_log_bytes,
)
from simulator.settings import EngineSettings

DRIVER_LOG = "simulator.server.driver"


@pytest.mark.parametrize(
    ("environment", "level"),
    [
        ({}, logging.INFO),
        ({"VLLM_LOGGING_LEVEL": "WARNING"}, logging.WARNING),
        ({"VLLM_LOGGING_LEVEL": "debug"}, logging.DEBUG),
        ({"VLLM_LOGGING_LEVEL": "LOUD"}, logging.INFO),
    ],
)
def test_the_level_is_read_as_vllm_reads_it(environment: dict[str, str], level: int) -> None:
    assert logging_level(environment) == level


@pytest.mark.parametrize(
    ("log_level", "flag", "logs"),
    [
        (logging.INFO, "true", True),
        (logging.WARNING, "true", False),  # log-disk's WARNING silences the lines
        (logging.INFO, "false", False),  # and so does turning the flag off
    ],
)
def test_a_server_logs_requests_only_at_info_with_the_flag(
    tmp_path: Path, log_level: int, flag: str, logs: bool
) -> None:
    config = tmp_path / "vllm.yaml"
    config.write_text(f"enable-log-requests: {flag}\n")
    options = ServeOptions(config, "llama-3.1-8b-h100-tp1", log_level=log_level)
    assert resolve(options).log_requests is logs


@pytest.mark.asyncio
@pytest.mark.parametrize("log_requests", [True, False])
async def test_each_request_taken_writes_one_line_of_the_counted_size(
    profile_8b: EngineProfile, caplog: pytest.LogCaptureFixture, log_requests: bool
) -> None:
    caplog.set_level(logging.INFO, logger=DRIVER_LOG)
    clock = LoopClock(asyncio.get_running_loop())
    engine = Engine(profile_8b, EngineSettings.defaults(profile_8b), now=clock.now())
    driver = RealTimeDriver(engine, clock, None, log_requests=log_requests)
    for prompt, output in ((1020, 129), (3, 1)):
        assert driver.submit_load(prompt, output) is None
    lines = [r.getMessage() for r in caplog.records if r.name == DRIVER_LOG]
    if not log_requests:
        assert lines == []
        return
    assert lines == [request_line("load-1", 1020, 129), request_line("load-2", 3, 1)]
    assert "max_tokens=129" in lines[0]
    assert lines[0].count(", ") >= 1019  # the prompt's token ids, listed
    # What the demo counts for a run without the governor is what the file takes.
    assert request_log_bytes("load-1", 1020, 129) == PREFIX_BYTES + len(lines[0]) + 1
    assert 7 * 1020 < request_log_bytes("load-1", 1020, 129) < 7 * 1020 + 200
