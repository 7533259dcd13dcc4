"""Host-name lookups, each in a thread of its own and at most one at a time per name.

The system resolver (``getaddrinfo``) blocks, and asyncio runs it in the loop's default pool:
a handful of threads that ``asyncio.to_thread`` (the batch runner's file work, the metrics
endpoint's stop) shares. A lookup that hangs (a DNS server that stopped answering) keeps its
thread for the resolver's whole timeout, and a target scraped every 2 s queues a new lookup at
every scrape: a few such targets would hold every thread of the pool, and every other name,
and every other user of the pool, would wait behind them. The same isolation as the sources'
blocking calls, for the same reason: a name's lookup runs in a daemon thread of its own, and
while it has not returned, the next lookup of that name fails at once instead of piling up.
The exchange that asked gives up at its own deadline either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable

# (host, port) -> the lookup still running for it. Module-wide: every exchange to a name shares
# its lookup's state, whichever source or actuator started it.
_RUNNING: dict[tuple[str, int], asyncio.Future[list[str]]] = {}

Resolver = Callable[[str, int], list[str]]


class LookupStillRunning(OSError):
    """The previous lookup of the same name has not returned yet."""


def system_addresses(host: str, port: int) -> list[str]:
    """The addresses the system resolver gives ``host`` (blocking), in its order, once each."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def addresses_of(host: str, port: int, resolver: Resolver = system_addresses) -> list[str]:
    """The addresses of ``host``, looked up in a thread of its own.

    Raises:
        LookupStillRunning: a lookup of ``host`` started earlier has not returned yet.
        OSError: the resolver failed (``socket.gaierror`` for an unknown name).
    """
    key, loop = (host, port), asyncio.get_running_loop()
    running = _RUNNING.get(key)
    # A lookup of an earlier loop (a test's, a one-off command's) has nobody to answer here.
    if running is not None and not running.done() and running.get_loop() is loop:
        message = f"the lookup of {host} started earlier has not returned yet"
        raise LookupStillRunning(message)
    answer: asyncio.Future[list[str]] = loop.create_future()
    # Read its outcome even when the exchange gave up on it, so none is reported as lost.
    answer.add_done_callback(lambda done: done.cancelled() or done.exception())
    _RUNNING[key] = answer

    def settle(addresses: list[str] | None, error: BaseException | None) -> None:
        if answer.done():
            return  # the loop's waiter gave up and cancelled it; the thread's answer is moot
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(addresses or [])

    def look_up() -> None:
        try:
            found = resolver(host, port)
        except BaseException as exc:
            _call_soon(loop, settle, None, exc)
        else:
            _call_soon(loop, settle, found, None)
        finally:
            _call_soon(loop, _forget, key, answer)

    threading.Thread(target=look_up, name=f"lookup {host}", daemon=True).start()
    return await asyncio.shield(answer)


def _forget(key: tuple[str, int], answer: asyncio.Future[list[str]]) -> None:
    if _RUNNING.get(key) is answer:
        del _RUNNING[key]


def _call_soon(
    loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: object
) -> None:
    # The loop may have closed while the lookup ran (the daemon stopped): nobody waits then.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, *args)
