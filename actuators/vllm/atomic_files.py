"""Replacing a config file so that no reader, and no crash, ever sees half of it.

The new content goes to a temporary file in the same directory (a rename is atomic only
within one file system), takes the old file's mode (and owner, when running as root), is
flushed to disk, and is renamed over the old file; then the directory is flushed, so that the
rename itself survives a power cut. Until the rename, the old file is untouched; after it, the
new one is complete. A crash between the two leaves a stray temporary file, which
:func:`remove_stray_temporaries` clears on the next start.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from daemon.api import ConfigWriteError

_PREFIX = ".vllm-governor-"
_SUFFIX = ".tmp"
# A file the governor creates (an environment file that did not exist) may hold secrets.
NEW_FILE_MODE = 0o600


@dataclass(frozen=True, slots=True)
class FileSnapshot:
    """A config file's content and mode as read (``exists`` False: there was no file)."""

    path: Path
    exists: bool
    text: str
    mode: int


def snapshot(path: Path) -> FileSnapshot:
    """Read ``path``'s text and mode; a missing file reads as empty.

    Raises:
        ConfigWriteError: the file exists but cannot be read.
    """
    try:
        with path.open(encoding="utf-8") as handle:
            mode = stat.S_IMODE(os.fstat(handle.fileno()).st_mode)
            return FileSnapshot(path, True, handle.read(), mode)
    except FileNotFoundError:
        return FileSnapshot(path, False, "", NEW_FILE_MODE)
    except (OSError, UnicodeDecodeError) as exc:
        message = f"cannot read {path}: {exc}"
        raise ConfigWriteError(message) from exc


def atomic_write(path: Path, text: str, mode: int | None = None) -> None:
    """Replace ``path`` with ``text`` atomically, keeping its mode and owner.

    Raises:
        ConfigWriteError: any step failed; ``path`` is as it was, and no temporary is left.
    """
    directory = path.parent
    try:
        old = path.stat()
    except FileNotFoundError:
        old = None
    except OSError as exc:
        message = f"cannot stat {path}: {exc}"
        raise ConfigWriteError(message) from exc
    try:
        descriptor, temporary = tempfile.mkstemp(prefix=_PREFIX, suffix=_SUFFIX, dir=directory)
    except OSError as exc:
        message = f"cannot create a temporary file in {directory}: {exc}"
        raise ConfigWriteError(message) from exc
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            _take_attributes(handle.fileno(), old, mode)
            os.fsync(handle.fileno())
        Path(temporary).replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            Path(temporary).unlink()
        message = f"cannot replace {path}: {exc} (the old file is intact)"
        raise ConfigWriteError(message) from exc
    _flush_directory(directory)


def remove_stray_temporaries(path: Path) -> list[Path]:
    """Remove temporaries a crash left next to ``path``; return what was removed."""
    removed = []
    with contextlib.suppress(OSError):
        for stray in path.parent.glob(f"{_PREFIX}*{_SUFFIX}"):
            with contextlib.suppress(OSError):
                stray.unlink()
                removed.append(stray)
    return removed


def _take_attributes(descriptor: int, old: os.stat_result | None, mode: int | None) -> None:
    """Give the temporary file the old file's mode, and its owner when running as root."""
    if old is None:
        os.fchmod(descriptor, NEW_FILE_MODE if mode is None else mode)
        return
    os.fchmod(descriptor, stat.S_IMODE(old.st_mode))
    if os.geteuid() == 0 and (old.st_uid, old.st_gid) != (0, 0):
        os.fchown(descriptor, old.st_uid, old.st_gid)


def _flush_directory(directory: Path) -> None:
    """Make the rename durable. Some file systems refuse fsync on a directory: that is fine."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
