"""The queue between aiomqtt's socket reader and the source: bounded, and drained in batches.

aiomqtt lets the caller choose the queue class. The one made here, when full, drops the
*oldest* message and counts it (aiomqtt's own bound drops the newest and logs a warning per
message; for telemetry the newest reading is the valuable one, and a log line per message is
what the governor must not do). It also lets the source take every message already waiting in
one go: ``async for message in client.messages`` costs a task and a wait per message, several
loop turns, while the reader adds one message per turn, so under a burst the plain loop falls
behind however cheap the mapping is.

The queue is bounded in bytes too, not only in messages: MQTT allows payloads of up to 256 MB,
and a few thousand queued megabyte payloads would be gigabytes. A payload larger than a reading
can be (:data:`~daemon.sources.mqtt.payloads.MAX_PAYLOAD_BYTES`) is cut to one byte more than
that as it arrives, which is all it takes to reject it as oversized, with its topic, later; and
the oldest messages make way while the queue holds more than :data:`INCOMING_BYTES`.
"""

from __future__ import annotations

import asyncio

import aiomqtt

from daemon.sources.mqtt.payloads import MAX_PAYLOAD_BYTES

# The most payload bytes waiting between the socket and the source. Telemetry of a few hundred
# bytes a message fits tens of thousands of messages in it; cut oversized ones, over a hundred.
INCOMING_BYTES = 8 << 20


class Inbox:
    """Counts drops and gives batched access to the queue aiomqtt creates from it."""

    def __init__(self, max_bytes: int = INCOMING_BYTES) -> None:
        self.dropped = 0
        self.max_bytes = max_bytes
        self.held_bytes = 0  # payload bytes now queued
        self._queue: asyncio.Queue[aiomqtt.Message] | None = None

    def queue_type(self) -> type[asyncio.Queue[aiomqtt.Message]]:
        """A queue class for ``aiomqtt.Client(queue_type=...)`` that reports to this inbox."""
        inbox = self

        class DroppingQueue(asyncio.Queue[aiomqtt.Message]):
            def __init__(self, maxsize: int = 0) -> None:
                super().__init__(maxsize)
                inbox._queue = self  # a new client, a new queue: follow the latest
                inbox.held_bytes = 0

            def put_nowait(self, item: aiomqtt.Message) -> None:
                item = _cut(item)
                size = _size(item)
                while not self.empty() and (
                    self.full() or inbox.held_bytes + size > inbox.max_bytes
                ):
                    self.get_nowait()
                    inbox.dropped += 1
                super().put_nowait(item)
                inbox.held_bytes += size

            def get_nowait(self) -> aiomqtt.Message:
                item = super().get_nowait()
                inbox.held_bytes -= _size(item)
                return item

        return DroppingQueue

    def take_waiting(self, limit: int) -> list[aiomqtt.Message]:
        """Up to ``limit`` messages already queued, without waiting."""
        queue = self._queue
        taken: list[aiomqtt.Message] = []
        while queue is not None and len(taken) < limit and not queue.empty():
            taken.append(queue.get_nowait())
        return taken


def _size(message: aiomqtt.Message) -> int:
    payload = message.payload
    return len(payload) if isinstance(payload, bytes | bytearray | str) else 0


def _cut(message: aiomqtt.Message) -> aiomqtt.Message:
    """The message, its payload cut to one byte past the largest a reading may be."""
    if _size(message) <= MAX_PAYLOAD_BYTES:
        return message
    payload = message.payload
    assert isinstance(payload, bytes | bytearray | str)
    message.payload = payload[: MAX_PAYLOAD_BYTES + 1]
    return message
