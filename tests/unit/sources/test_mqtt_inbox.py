from __future__ import annotations

import pytest
from aiomqtt import Message

from daemon.sources.mqtt.inbox import INCOMING_BYTES, Inbox
from daemon.sources.mqtt.payloads import Rejection, read_value


def _message(n: int) -> Message:
    return Message("t", str(n).encode(), qos=0, retain=False, mid=0, properties=None)


@pytest.mark.asyncio
async def test_a_full_inbox_drops_the_oldest_and_counts_it() -> None:
    inbox = Inbox()
    queue = inbox.queue_type()(maxsize=3)
    for n in range(5):
        queue.put_nowait(_message(n))
    assert inbox.dropped == 2
    assert [m.payload for m in inbox.take_waiting(2)] == [b"2", b"3"]
    assert [m.payload for m in inbox.take_waiting(10)] == [b"4"]
    assert inbox.take_waiting(10) == []


def test_an_inbox_without_a_client_yet_has_nothing_waiting() -> None:
    assert Inbox().take_waiting(10) == []


@pytest.mark.asyncio
async def test_megabyte_payloads_are_cut_as_they_arrive_and_the_queue_stays_within_its_bytes() -> (
    None
):
    inbox = Inbox()
    queue = inbox.queue_type()(maxsize=10_000)
    for n in range(300):  # 300 MiB offered, far below the message bound
        payload = str(n).encode().ljust(1 << 20, b" ")
        queue.put_nowait(Message(f"rack/{n}", payload, qos=0, retain=False, mid=0, properties=None))
    assert inbox.held_bytes <= INCOMING_BYTES
    waiting = inbox.take_waiting(10_000)
    assert sum(len(m.payload) for m in waiting) <= INCOMING_BYTES
    assert inbox.dropped == 300 - len(waiting) > 0
    # The newest are kept, and each still reads as oversized, with its topic.
    assert str(waiting[-1].topic) == "rack/299"
    assert {read_value(m.payload, ()) for m in waiting} == {Rejection.OVERSIZED}
    assert inbox.held_bytes == 0


@pytest.mark.asyncio
async def test_small_readings_are_bounded_by_count_only() -> None:
    inbox = Inbox()
    queue = inbox.queue_type()(maxsize=10_000)
    for n in range(10_000):
        queue.put_nowait(_message(n))
    assert inbox.dropped == 0
    assert len(inbox.take_waiting(20_000)) == 10_000
