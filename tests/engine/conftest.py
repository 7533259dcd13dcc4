"""Engine tests run on a real event loop and fail when a test leaves a task behind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio


@pytest_asyncio.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail the test if it leaves tasks running after it ends."""
    yield
    current = asyncio.current_task()
    leaked = [task for task in asyncio.all_tasks() if task is not current and not task.done()]
    assert not leaked, f"tasks leaked by the test: {[task.get_name() for task in leaked]}"
