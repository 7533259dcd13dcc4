"""Scripted faults of the Slack double: what the next calls of a Web API method suffer."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RateLimited:
    """HTTP 429 ``{"ok": false, "error": "ratelimited"}`` with ``Retry-After``, as Slack does."""

    retry_after_s: int = 1


@dataclass(frozen=True, slots=True)
class ServerError:
    """An HTTP 5xx with a JSON body (Slack's own outages answer 500 or 503)."""

    status: int = 500


@dataclass(frozen=True, slots=True)
class Drop:
    """The connection is cut without an answer.

    ``after_processing``: the call takes effect first (a message is posted) and only the
    answer is lost, which is how a retry turns into a duplicate.
    """

    after_processing: bool = False


@dataclass(frozen=True, slots=True)
class Slow:
    """The answer comes after ``delay_s`` (a client with a shorter timeout gives up)."""

    delay_s: float


Fault = RateLimited | ServerError | Drop | Slow


class FaultScript:
    """Faults queued per method; each call of the method takes the next one, if any."""

    def __init__(self) -> None:
        self._queued: dict[str, deque[Fault]] = {}

    def add(self, method: str, fault: Fault, times: int = 1) -> None:
        """Make the next ``times`` calls of ``method`` suffer ``fault``."""
        self._queued.setdefault(method, deque()).extend([fault] * times)

    def take(self, method: str) -> Fault | None:
        """The fault for this call of ``method``, or None."""
        queued = self._queued.get(method)
        return queued.popleft() if queued else None

    def clear(self) -> None:
        """Forget every queued fault."""
        self._queued.clear()
