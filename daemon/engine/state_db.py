"""How each store opens the governor's state database and writes to it.

The policy states, the actuation journal and the approvals share one SQLite file under
``governor.state_dir``, each through its own connection. All of them open it the same way and
write in ``BEGIN IMMEDIATE`` transactions, so that two writers queue on the file's lock instead
of failing half-way through a read-modify-write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def connect(path: Path, schema: str) -> sqlite3.Connection:
    """Open (creating it and its directory if need be) the state database at ``path``.

    WAL with ``synchronous=FULL``: what a store wrote is on disk before the governor acts on
    it. ``busy_timeout`` lets a writer wait for another connection's transaction to end.

    Args:
        path: The database file.
        schema: ``CREATE TABLE IF NOT EXISTS`` statements of the caller's tables.

    Returns:
        A connection in autocommit mode (transactions are explicit, see :func:`transaction`).
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA busy_timeout=5000")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(schema)
    return db


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` and re-raise on any error."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
