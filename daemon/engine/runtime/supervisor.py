"""One place that spawns every long-lived task of the governor.

Each eternal task is named in plain words and runs inside a guard that logs a crash or an
unexpected finish. Tasks start in the order given; each one reports readiness through the
:class:`Readiness` handle it receives (like Trio's ``task_status.started()``), and the next
task starts only then, so a task may rely on everything started before it. When all are ready
the supervisor calls ``on_ready`` (the daemon sends ``READY=1`` there).

The supervisor returns normally when ``stop`` is set: every task is cancelled and awaited.
It raises :class:`TaskCrashedError` when a task crashes or finishes by itself, after cancelling
the others, so that the process exits non-zero and systemd restarts it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from daemon.core.errors import TaskCrashedError

log = logging.getLogger(__name__)


class Readiness:
    """Handed to each task; the task calls :meth:`started` once it can serve."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def started(self) -> None:
        """Tell the supervisor this task is ready; later calls are harmless."""
        self._event.set()

    async def wait(self) -> None:
        """Wait until :meth:`started` has been called."""
        await self._event.wait()


@dataclass(frozen=True, slots=True)
class EternalTask:
    """A task meant to run for as long as the daemon does.

    Attributes:
        name: Plain-words name used in logs and status ("control socket server").
        run: Coroutine function; it receives its :class:`Readiness` and must not return.
    """

    name: str
    run: Callable[[Readiness], Awaitable[None]]


class _StopRequested(Exception):
    """Raised inside the task group to end it on a graceful stop."""


async def supervise(
    tasks: Sequence[EternalTask],
    stop: asyncio.Event,
    on_ready: Callable[[], None] = lambda: None,
) -> None:
    """Run ``tasks`` until ``stop`` is set or one of them crashes.

    Raises:
        TaskCrashedError: a task crashed or finished; the others have been cancelled.
    """
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(_wait_for_stop(stop), name="stop watcher")
            for task in tasks:
                readiness = Readiness()
                group.create_task(_guarded(task, readiness), name=task.name)
                # A task that ends before it is ready raises in the group, which cancels this
                # wait; so waiting for readiness alone cannot hang on a dead task.
                await readiness.wait()
            log.info("all tasks ready", extra={"tasks": [task.name for task in tasks]})
            on_ready()
    except* _StopRequested:
        log.info("all tasks stopped")
    except* TaskCrashedError as group_error:
        raise group_error.exceptions[0] from None


async def _wait_for_stop(stop: asyncio.Event) -> None:
    await stop.wait()
    raise _StopRequested


async def _guarded(task: EternalTask, readiness: Readiness) -> None:
    log.info("task starting", extra={"task": task.name})
    try:
        await task.run(readiness)
    except asyncio.CancelledError:
        log.debug("task cancelled", extra={"task": task.name})
        raise
    except Exception as exc:
        log.exception("task crashed", extra={"task": task.name})
        message = f"task {task.name!r} crashed: {exc}"
        raise TaskCrashedError(message) from exc
    log.error("task finished unexpectedly", extra={"task": task.name})
    message = f"task {task.name!r} finished, but it should run for as long as the daemon"
    raise TaskCrashedError(message)
