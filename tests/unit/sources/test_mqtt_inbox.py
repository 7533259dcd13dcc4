from __future__ import annotations

import pytest
from aiomqtt import Message

from daemon.sources.mqtt.inbox import Inbox


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
