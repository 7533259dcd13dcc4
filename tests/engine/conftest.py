"""Engine tests run on a real event loop and fail when a test leaves a task behind.

The approvals tests share one fixture: a running Slack double; the batch tests another: a
batch ledger in the test's directory.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from daemon.engine.storage.batch_ledger import BatchLedger
from tests.support.slack_double import SlackDouble
from tests.support.slack_double.messages import unset_proxies


@pytest_asyncio.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail the test if it leaves tasks running after it ends."""
    yield
    current = asyncio.current_task()
    leaked = [task for task in asyncio.all_tasks() if task is not current and not task.done()]
    assert not leaked, f"tasks leaked by the test: {[task.get_name() for task in leaked]}"


@pytest_asyncio.fixture
async def double(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SlackDouble]:
    """A running Slack double, reachable by slack-sdk on loopback (no proxy in between)."""
    unset_proxies(monkeypatch)
    async with SlackDouble() as running:
        yield running


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[BatchLedger]:
    """A batch ledger (``state.sqlite3``) in the test's directory, closed after it."""
    opened = BatchLedger(tmp_path / "state.sqlite3")
    yield opened
    opened.close()
