"""The batch inbox: input files dropped into ``[batch] inbox_dir`` become jobs by themselves.

Every ``inbox_poll_s`` the directory is listed. A ``NAME.jsonl`` that no job has taken yet (any
job, in any state, with that input path) and that has not been refused is submitted for
``inbox_target`` once its size and modification time have held for one whole poll: a file
still being copied in is left for the next look (writing it elsewhere and renaming it in is
better still). A refused file gets ``NAME.rejected.txt`` beside it, with every problem as
file:line, and is not looked at again until that file is removed. The result files
(``*.output.jsonl``, ``*.errors.jsonl``) are never taken for inputs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from daemon.batch.errors import BatchError
from daemon.batch.jobs import BatchJob
from daemon.core.settings import GovernorConfig
from daemon.engine.runtime.supervisor import Readiness

log = logging.getLogger(__name__)

Accept = Callable[[Path, str, str], Awaitable[BatchJob]]
RESULT_SUFFIXES = (".output.jsonl", ".errors.jsonl")


def rejected_path(input_path: Path) -> Path:
    """``NAME.rejected.txt`` beside ``NAME.jsonl``: why the inbox refused it."""
    return input_path.with_name(input_path.name.removesuffix(".jsonl") + ".rejected.txt")


class BatchInbox:
    """Watches the inbox directory and submits what lands there."""

    def __init__(
        self,
        config: Callable[[], GovernorConfig],
        accept: Accept,
        known: Callable[[Path], bool],
    ) -> None:
        self._config = config
        self._accept = accept
        self._known = known
        # The (size, mtime) each candidate had at the last look: taken when it holds.
        self._seen: dict[Path, tuple[int, int]] = {}

    async def run(self, readiness: Readiness) -> None:
        """The eternal task: look at the inbox every ``inbox_poll_s`` (when one is configured)."""
        readiness.started()
        while True:
            section = self._config().batch
            if section.inbox_target:
                await self.look(section.inbox_dir, section.inbox_target)
            await asyncio.sleep(section.inbox_poll_s)

    async def look(self, directory: Path, target: str) -> None:
        """One look: submit each file that is ready, refuse each that is invalid."""
        try:
            listed = await asyncio.to_thread(_listing, directory)
        except OSError as exc:
            log.warning("batch inbox unreadable", extra={"dir": str(directory), "error": str(exc)})
            return
        seen, self._seen = self._seen, {}
        for path, stamp in listed:
            if self._known(path):
                continue
            if seen.get(path) != stamp:
                self._seen[path] = stamp  # new or still changing: look again next time
                continue
            await self._submit(path, target)

    async def _submit(self, path: Path, target: str) -> None:
        try:
            job = await self._accept(path, target, "the batch inbox")
        except BatchError as exc:
            log.warning("batch inbox file refused", extra={"path": str(path), "error": str(exc)})
            try:
                rejected_path(path).write_text(f"{exc}\n", encoding="utf-8")
            except OSError as failure:
                # Without the note the file is refused again at each look, and logged again.
                log.warning("batch inbox note unwritable", extra={"error": str(failure)})
            return
        log.info("batch inbox file submitted", extra={"path": str(path), "job": job.job_id})


def _listing(directory: Path) -> list[tuple[Path, tuple[int, int]]]:
    """The inbox's input files not refused yet (absolute paths), with their (size, mtime)."""
    found = []
    for path in sorted(directory.absolute().glob("*.jsonl")):
        if path.name.endswith(RESULT_SUFFIXES) or rejected_path(path).exists():
            continue
        try:
            status = path.stat()
        except FileNotFoundError:
            continue  # taken away meanwhile
        if path.is_file():
            found.append((path, (status.st_size, status.st_mtime_ns)))
    return found
