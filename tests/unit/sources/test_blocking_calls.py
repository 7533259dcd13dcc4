from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

from daemon.core.errors import SourceUnavailable
from daemon.sources.blocking_calls import OneCallAtATime


@pytest.mark.asyncio
async def test_results_and_errors_come_back_from_the_thread() -> None:
    calls = OneCallAtATime("test")
    assert await calls.run(threading.current_thread) is not threading.current_thread()
    with pytest.raises(ZeroDivisionError):
        await calls.run(lambda: 1 / 0)
    assert await calls.run(lambda: 42) == 42  # a failed call frees the way too


@pytest.mark.asyncio
async def test_a_stuck_call_refuses_the_next_until_it_returns() -> None:
    calls = OneCallAtATime("NVML")
    release = threading.Event()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await calls.run(release.wait)  # abandoned, but its thread keeps waiting
    with pytest.raises(SourceUnavailable, match="NVML has not returned") as refused:
        await calls.run(lambda: 1)
    assert refused.value.detail == "hung"
    release.set()
    async with asyncio.timeout(2):  # the stuck thread ends just after the release
        while True:
            await asyncio.sleep(0.005)
            with contextlib.suppress(SourceUnavailable):
                assert await calls.run(lambda: 2) == 2
                break
