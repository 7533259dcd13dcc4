"""The output and errors files of a job: appended a durable line at a time, reconciled on resume.

Exactly once per line rests on the order of two writes. A result is first appended to its file
and ``fsync``-ed; only then does the ledger mark the line done. A crash between the two leaves
a line that is in the file but not marked: on resume, :meth:`ResultWriter.reconcile` reads the
custom_ids the file holds, and the engine marks them done instead of sending them again. A
crash in the middle of an append leaves a torn last line (no newline, or not JSON): reconcile
cuts the file back to the last whole line, and that request is sent again. Nothing that is in
the file is ever written a second time, and nothing marked done is missing from it.

The file is opened ``O_APPEND`` and each line goes out in one ``write``; a newly created file
has its directory ``fsync``-ed too, so that the file itself survives a power cut. A result file
that is a symbolic link is refused (``O_NOFOLLOW``): the daemon writes where the input is, and a
link planted there must not send its writes elsewhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW


class ResultWriter:
    """One result file (output or errors) of one job, opened for appending."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def reconcile(self) -> list[str]:
        """Cut a torn tail off the file, and return the custom_ids of its whole lines, in order.

        A line that is not a JSON object with a string ``custom_id`` ends the usable part: it
        and everything after it are cut (those requests are sent again).
        """
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        custom_ids: list[str] = []
        kept = 0
        while (end := data.find(b"\n", kept)) != -1:
            custom_id = _custom_id_of(data[kept:end])
            if custom_id is None:
                break
            custom_ids.append(custom_id)
            kept = end + 1
        if kept < len(data):
            with self.path.open("r+b") as handle:
                handle.truncate(kept)
                os.fsync(handle.fileno())
        return custom_ids

    def append(self, line: bytes) -> None:
        """Append ``line`` (newline included) and wait until it is on disk."""
        fd = self._open()
        view = memoryview(line)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)

    def close(self) -> None:
        """Close the file (appending again reopens it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            created = not self.path.exists()
            self._fd = os.open(self.path, _APPEND_FLAGS, 0o640)
            if created:
                directory = os.open(self.path.parent, os.O_RDONLY)
                try:
                    os.fsync(directory)
                finally:
                    os.close(directory)
        return self._fd


def _custom_id_of(raw: bytes) -> str | None:
    try:
        document: Any = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or not isinstance(document.get("custom_id"), str):
        return None
    return str(document["custom_id"])
