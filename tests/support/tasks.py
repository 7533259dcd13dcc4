"""Running a long-lived coroutine for the span of a test, and waiting on real-time conditions."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any


@contextlib.asynccontextmanager
async def running(
    coroutine: Coroutine[Any, Any, None], name: str
) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``coroutine`` as a task inside the block; cancel it after, re-raising its crash."""
    task = asyncio.create_task(coroutine, name=name)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def eventually(
    condition: Callable[[], bool],
    what: str,
    *,
    timeout_s: float = 15.0,
    task: asyncio.Task[None] | None = None,
) -> None:
    """Wait until ``condition()`` holds; fail naming ``what`` after ``timeout_s``.

    The timeout is generous on purpose: it bounds a failure, it does not measure speed.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        if task is not None and task.done():
            task.result()  # re-raise a crash
            message = f"the task ended while waiting for {what}"
            raise AssertionError(message)
        if loop.time() > deadline:
            message = f"timed out after {timeout_s} s waiting for {what}"
            raise AssertionError(message)
        await asyncio.sleep(0.02)


async def leaked_tasks(grace_s: float = 1.0) -> list[str]:
    """Names of tasks other than the caller still running after ``grace_s``.

    Libraries finish some housekeeping a loop iteration or two after a ``with`` block closes
    (aiomqtt cancels its keepalive task through ``call_soon_threadsafe``), hence the grace.
    """
    current = asyncio.current_task()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    while True:
        leaked = [task for task in asyncio.all_tasks() if task is not current and not task.done()]
        if not leaked or loop.time() > deadline:
            return [task.get_name() for task in leaked]
        await asyncio.sleep(0.01)
