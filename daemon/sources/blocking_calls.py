"""Blocking library calls (NVML, ``statvfs``) run off the event loop, one at a time per source.

A poll that overruns its timeout is abandoned by the runner, but its thread cannot be stopped:
an NVML call on a GPU that fell off the bus, or ``statvfs`` on a dead NFS mount, can block for
ever. Starting a fresh thread at every poll would pile such threads up, and a pool shared with
the rest of the daemon (``asyncio.to_thread``'s) would run dry. So each call gets its own daemon
thread (one that cannot hold up the process's exit), and while a call is still running the next
one fails at once with ``detail="hung"``: the source shows as down, and recovers by itself when
the stuck call returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable
from typing import TypeVar

from daemon.core.errors import SourceUnavailable

T = TypeVar("T")


class OneCallAtATime:
    """Runs blocking calls in a thread, refusing a new one while the last has not returned."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._busy = False

    async def run(self, work: Callable[[], T]) -> T:
        """The result of ``work()`` run in a thread; its exceptions are raised here.

        Raises:
            SourceUnavailable: The previous call has not returned yet (``detail="hung"``).
        """
        if self._busy:
            message = f"{self._what} has not returned from the previous call"
            raise SourceUnavailable(message, detail="hung")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def call() -> None:
            try:
                settle = functools.partial(future.set_result, work())
            except Exception as exc:  # raised again in the awaiting task
                settle = functools.partial(future.set_exception, exc)
            finally:
                # Free before handing over, so a poll right after this one is never refused.
                self._busy = False
            _hand_over(loop, future, settle)

        self._busy = True
        threading.Thread(target=call, name=f"{self._what} call", daemon=True).start()
        return await future


def _hand_over(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[T], settle: Callable[[], None]
) -> None:
    def settle_unless_abandoned() -> None:
        if not future.done():  # the poll may have been cancelled on timeout meanwhile
            settle()

    # The loop may have closed while the call ran; then nobody is waiting for it any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(settle_unless_abandoned)
