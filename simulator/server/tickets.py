"""A client's view of one request in the engine: tokens as they come out, then its end."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from simulator.requests import FinishedRequest, Request


@dataclass(eq=False, slots=True)
class Ticket:
    """What an HTTP handler holds while its request is in the engine.

    The driver updates ``generated`` after every step (streaming tickets only) and sets
    ``record`` when the request ends; ``changed`` is set whenever either moves, so a handler
    waits on it instead of polling.

    Attributes:
        request: The request inside the engine.
        streaming: Whether the client wants tokens as they are generated.
        generated: Output tokens produced so far, as last delivered by the driver.
        record: How the request ended, once it has.
        changed: Set when ``generated`` or ``record`` changed; the handler clears it.
    """

    request: Request
    streaming: bool
    generated: int = 0
    record: FinishedRequest | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def request_id(self) -> str:
        """The request's id (``cmpl-...``)."""
        return self.request.request_id

    def progress(self, generated: int) -> None:
        """The driver saw ``generated`` tokens out."""
        if generated != self.generated:
            self.generated = generated
            self.changed.set()

    def finish(self, record: FinishedRequest) -> None:
        """The request ended (completed or aborted)."""
        self.generated = record.output_tokens
        self.record = record
        self.changed.set()

    async def wait(self) -> None:
        """Wait until something changed since the last call, then clear the flag."""
        await self.changed.wait()
        self.changed.clear()
