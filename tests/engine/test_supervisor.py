from __future__ import annotations

import asyncio

import pytest

from daemon.core.errors import TaskCrashedError
from daemon.engine.runtime.supervisor import EternalTask, Readiness, supervise


class Journal:
    """What the tasks did, in order."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def task(
        self,
        name: str,
        *,
        crash_after_ready: bool = False,
        crash_before_ready: bool = False,
        finish: bool = False,
    ) -> EternalTask:
        async def run(readiness: Readiness) -> None:
            self.events.append(f"{name} started")
            if crash_before_ready:
                raise RuntimeError(f"{name} broke")
            await asyncio.sleep(0)
            readiness.started()
            self.events.append(f"{name} ready")
            if crash_after_ready:
                raise RuntimeError(f"{name} broke")
            if finish:
                return
            try:
                await asyncio.Event().wait()
            finally:
                self.events.append(f"{name} cleaned up")

        return EternalTask(name, run)


@pytest.mark.asyncio
async def test_tasks_start_in_order_each_after_the_previous_is_ready() -> None:
    journal = Journal()
    stop = asyncio.Event()
    ready_calls: list[list[str]] = []

    def on_ready() -> None:
        ready_calls.append(list(journal.events))
        stop.set()

    await supervise([journal.task("a"), journal.task("b")], stop, on_ready)
    assert ready_calls == [["a started", "a ready", "b started", "b ready"]]
    assert sorted(journal.events[4:]) == ["a cleaned up", "b cleaned up"]


@pytest.mark.asyncio
async def test_a_crash_after_ready_cancels_the_others_and_raises() -> None:
    journal = Journal()
    tasks = [journal.task("steady"), journal.task("fragile", crash_after_ready=True)]
    with pytest.raises(TaskCrashedError, match="task 'fragile' crashed: fragile broke"):
        await supervise(tasks, asyncio.Event())
    assert "steady cleaned up" in journal.events


@pytest.mark.asyncio
async def test_a_crash_before_ready_never_reports_ready_nor_starts_later_tasks() -> None:
    journal = Journal()
    readied: list[bool] = []
    tasks = [journal.task("a"), journal.task("b", crash_before_ready=True), journal.task("c")]
    with pytest.raises(TaskCrashedError, match="'b' crashed"):
        await supervise(tasks, asyncio.Event(), lambda: readied.append(True))
    assert readied == []
    assert "c started" not in journal.events
    assert "a cleaned up" in journal.events


@pytest.mark.asyncio
async def test_an_eternal_task_that_returns_is_a_crash() -> None:
    journal = Journal()
    with pytest.raises(TaskCrashedError, match="'quitter' finished"):
        await supervise([journal.task("a"), journal.task("quitter", finish=True)], asyncio.Event())
    assert "a cleaned up" in journal.events


@pytest.mark.asyncio
async def test_stop_before_ready_still_stops_cleanly() -> None:
    stop = asyncio.Event()
    stop.set()

    async def never_ready(_readiness: Readiness) -> None:
        await asyncio.Event().wait()

    await supervise([EternalTask("slow starter", never_ready)], stop)
