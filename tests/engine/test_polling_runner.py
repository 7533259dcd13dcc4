"""The polling runner, on the virtual-time loop: hangs, backoffs and timeouts take no real time."""

from __future__ import annotations

import asyncio
import random
from typing import Self

import pytest

from daemon.core.backoff import Backoff
from daemon.core.errors import SourceUnavailable
from daemon.core.virtual_time import EPOCH, VirtualClock, run_in_virtual_time
from daemon.sources.health import HealthBoard, SourceState
from daemon.sources.polling import PollingRunner, PollResult
from daemon.sources.samples import Sample, SeriesKey
from daemon.sources.store import SignalStore

KEY = SeriesKey("x")


class ScriptedSource:
    """A source whose polls follow a script: a value, an exception, or a hang."""

    name = "scripted"
    interval_s = 0.01
    timeout_s = 0.2

    def __init__(self, script: list[float | BaseException | None]) -> None:
        self.script = script
        self.calls: list[float] = []
        self.entered = self.exited = False

    async def __aenter__(self) -> Self:
        self.entered = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.exited = True

    async def poll(self, now: float) -> PollResult:
        self.calls.append(now)
        step = self.script.pop(0) if self.script else 1.0
        if isinstance(step, BaseException):
            raise step
        if step is None:
            await asyncio.sleep(10)  # hangs past timeout_s
        return PollResult((Sample(KEY, float(step or 0), now, self.name),))


def _runner(source: ScriptedSource) -> tuple[PollingRunner, SignalStore, HealthBoard]:
    store, health = SignalStore(), HealthBoard()
    backoff = Backoff(base_s=0.02, cap_s=0.05, rng=random.Random(0))
    clock = VirtualClock(asyncio.get_running_loop(), EPOCH)
    return PollingRunner(source, store, health, clock, backoff), store, health


async def _run_until(runner: PollingRunner, done: asyncio.Event) -> None:
    started = asyncio.Event()
    task = asyncio.create_task(runner.run(started.set))
    try:
        await asyncio.wait_for(started.wait(), 2)
        await asyncio.wait_for(done.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_failures_and_hangs_mark_the_source_down_then_it_recovers() -> None:
    run_in_virtual_time(_failures_and_hangs())


async def _failures_and_hangs() -> None:
    source = ScriptedSource([SourceUnavailable("refused", detail="starting"), None, 5.0])
    runner, store, health = _runner(source)
    states: list[tuple[str, str]] = []
    done = asyncio.Event()

    def record(_name: str, ok: bool) -> None:
        entry = health.get("scripted")
        assert entry is not None
        states.append((entry.state.value, entry.detail))
        if ok:
            done.set()

    runner.on_poll = record
    await _run_until(runner, done)
    assert states == [("down", "starting"), ("down", "timeout"), ("up", "")]
    assert store.latest(KEY) is not None
    assert source.entered
    assert source.exited
    gaps = [later - earlier for earlier, later in zip(source.calls, source.calls[1:], strict=False)]
    assert all(gap >= source.interval_s for gap in gaps), "failures must not poll faster"


def test_a_bug_in_a_source_is_not_swallowed() -> None:
    run_in_virtual_time(_a_bug())


async def _a_bug() -> None:
    runner, _, health = _runner(ScriptedSource([ZeroDivisionError("bug")]))
    with pytest.raises(ZeroDivisionError):
        await runner.run(lambda: None)
    entry = health.get("scripted")
    assert entry is not None
    assert entry.state is SourceState.STARTING


def test_a_refusing_server_is_polled_at_its_interval_not_backed_off() -> None:
    run_in_virtual_time(_a_refusing_server())


async def _a_refusing_server() -> None:
    starting = [SourceUnavailable("refused", detail="starting") for _ in range(6)]
    source = ScriptedSource([*starting, 5.0])
    store, health = SignalStore(), HealthBoard()
    # A backoff far longer than the test: only a refusal's own pace lets it finish.
    slow = Backoff(base_s=30.0, cap_s=60.0, rng=random.Random(0))
    clock = VirtualClock(asyncio.get_running_loop(), EPOCH)
    runner = PollingRunner(source, store, health, clock, slow)
    done = asyncio.Event()
    runner.on_poll = lambda _name, ok: done.set() if ok else None
    await _run_until(runner, done)
    assert len(source.calls) == 7
    assert store.latest(KEY) is not None
    timed_out = ScriptedSource([None, 5.0])
    runner = PollingRunner(timed_out, SignalStore(), HealthBoard(), clock, slow)
    runner.on_poll = lambda _name, ok: None
    started = asyncio.Event()
    task = asyncio.create_task(runner.run(started.set))
    await asyncio.wait_for(started.wait(), 2)
    await asyncio.sleep(25.0)  # virtual: within the first backoff (30 s and more)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert len(timed_out.calls) == 1, "a server that does not answer is backed off"
