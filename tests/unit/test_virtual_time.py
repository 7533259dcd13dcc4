"""The virtual-time loop: waits are skipped, order and timeouts kept, loopback sockets work."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from daemon.core.virtual_time import EPOCH, VirtualClock, run_in_virtual_time


def test_an_hour_of_sleeps_passes_in_virtual_time_in_order() -> None:
    async def main() -> tuple[list[str], float]:
        loop = asyncio.get_running_loop()
        order: list[str] = []

        async def after(seconds: float, name: str) -> None:
            await asyncio.sleep(seconds)
            order.append(f"{name}@{loop.time():g}")

        async with asyncio.TaskGroup() as group:
            group.create_task(after(3600, "late"))
            group.create_task(after(1.5, "early"))
            group.create_task(after(60, "middle"))
        return order, loop.time()

    began = time.monotonic()
    order, now = run_in_virtual_time(main())
    assert order == ["early@1.5", "middle@60", "late@3600"]
    assert now == 3600
    # An hour of waiting took a sliver of one: nothing slept for real.
    assert time.monotonic() - began < 60


def test_a_timeout_counts_virtual_seconds() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(30):
                await asyncio.Event().wait()
        return loop.time()

    assert run_in_virtual_time(main()) == 30


def test_the_clock_reads_the_loop_and_walks_the_wall_with_it() -> None:
    async def main() -> tuple[float, timedelta]:
        clock = VirtualClock(asyncio.get_running_loop(), EPOCH)
        await asyncio.sleep(90)
        return clock.monotonic(), clock.wall() - EPOCH

    assert run_in_virtual_time(main()) == (90, timedelta(seconds=90))


def test_loopback_exchanges_complete_without_the_clock_jumping_over_them() -> None:
    async def main() -> tuple[list[bytes], float]:
        loop = asyncio.get_running_loop()
        served = asyncio.Event()

        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while line := await reader.readline():
                await asyncio.sleep(0.25)  # the server takes a quarter of a (virtual) second
                writer.write(line.upper())
                await writer.drain()
            writer.close()
            await writer.wait_closed()
            served.set()

        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answers = []
        for word in (b"one\n", b"two\n", b"three\n"):
            writer.write(word)
            async with asyncio.timeout(1.0):  # a jump past the answer would time this out
                answers.append(await reader.readline())
        writer.close()
        await writer.wait_closed()
        await served.wait()
        server.close()
        await server.wait_closed()
        return answers, loop.time()

    answers, now = run_in_virtual_time(main())
    assert answers == [b"ONE\n", b"TWO\n", b"THREE\n"]
    assert now == pytest.approx(0.75)


def _slow_answer() -> str:
    time.sleep(0.05)
    return "done"


def test_a_blocking_call_handed_to_a_thread_takes_no_virtual_time() -> None:
    # A timer lies far ahead. In a real thread, the call would still be running when the loop
    # looks for something to do, and the clock would jump to that timer meanwhile.
    async def main() -> tuple[float, float, str]:
        loop = asyncio.get_running_loop()
        far = asyncio.create_task(asyncio.sleep(1000))
        before = loop.time()
        answer = await asyncio.to_thread(_slow_answer)
        after = loop.time()
        far.cancel()
        return before, after, answer

    before, after, answer = run_in_virtual_time(main())
    assert (after, answer) == (before, "done")


def test_a_blocking_calls_exception_reaches_its_await() -> None:
    def fails() -> None:
        raise OSError("disk gone")

    async def main() -> None:
        with pytest.raises(OSError, match="disk gone"):
            await asyncio.to_thread(fails)

    run_in_virtual_time(main())
