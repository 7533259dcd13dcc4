"""The queue between aiomqtt's socket reader and the source: bounded, and drained in batches.

aiomqtt lets the caller choose the queue class. The one made here, when full, drops the
*oldest* message and counts it (aiomqtt's own bound drops the newest and logs a warning per
message; for telemetry the newest reading is the valuable one, and a log line per message is
what the governor must not do). It also lets the source take every message already waiting in
one go: ``async for message in client.messages`` costs a task and a wait per message, several
loop turns, while the reader adds one message per turn, so under a burst the plain loop falls
behind however cheap the mapping is.
"""

from __future__ import annotations

import asyncio

import aiomqtt


class Inbox:
    """Counts drops and gives batched access to the queue aiomqtt creates from it."""

    def __init__(self) -> None:
        self.dropped = 0
        self._queue: asyncio.Queue[aiomqtt.Message] | None = None

    def queue_type(self) -> type[asyncio.Queue[aiomqtt.Message]]:
        """A queue class for ``aiomqtt.Client(queue_type=...)`` that reports to this inbox."""
        inbox = self

        class DroppingQueue(asyncio.Queue[aiomqtt.Message]):
            def __init__(self, maxsize: int = 0) -> None:
                super().__init__(maxsize)
                inbox._queue = self  # a new client, a new queue: follow the latest

            def put_nowait(self, item: aiomqtt.Message) -> None:
                if self.full():
                    self.get_nowait()
                    inbox.dropped += 1
                super().put_nowait(item)

        return DroppingQueue

    def take_waiting(self, limit: int) -> list[aiomqtt.Message]:
        """Up to ``limit`` messages already queued, without waiting."""
        queue = self._queue
        taken: list[aiomqtt.Message] = []
        while queue is not None and len(taken) < limit and not queue.empty():
            taken.append(queue.get_nowait())
        return taken
