"""How each store opens the governor's state database, migrates its tables and writes to it.

The policy states, the actuation journal, the approvals and the gate's cap journal share one
SQLite file under ``governor.state_dir`` (:data:`STATE_FILE`), each through its own
connection. All of them open it the same way and write in ``BEGIN IMMEDIATE`` transactions,
so that two writers queue on the file's lock instead of failing half-way through a
read-modify-write.

Each store owns a component of the schema (:class:`Schema`): an ordered list of migrations,
the first of which creates its tables. ``schema_versions`` records how many of them a file has
had, per component; opening a file applies the missing ones, each with its version bump in one
transaction, so a crash half-way leaves the file at the last whole version. A file migrated by
a newer governor (a version this one does not know) is refused rather than misread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from daemon.core.errors import GovernorError

STATE_FILE = "state.sqlite3"
VERSIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_versions (
    component TEXT PRIMARY KEY, version INTEGER NOT NULL
)
"""


class StateSchemaError(GovernorError):
    """The state database was written by a newer governor, or a migration failed."""


@dataclass(frozen=True, slots=True)
class Schema:
    """One store's tables, as the migrations that build them.

    Attributes:
        component: The store's name in ``schema_versions`` (``actuations``, ``approvals``...).
        migrations: SQL scripts; the i-th takes the component from version i to i + 1. The
            first creates the tables (``IF NOT EXISTS``, so that a file from before
            versioning takes it as a no-op). Never edit one that has shipped: add the next.
    """

    component: str
    migrations: tuple[str, ...]

    @property
    def version(self) -> int:
        """The version this governor brings the component to."""
        return len(self.migrations)


def connect(path: Path, schema: Schema) -> sqlite3.Connection:
    """Open (creating it and its directory if need be) the state database at ``path``.

    WAL with ``synchronous=FULL``: what a store wrote is on disk before the governor acts on
    it. ``busy_timeout`` lets a writer wait for another connection's transaction to end.

    Returns:
        A connection in autocommit mode (transactions are explicit, see :func:`transaction`),
        with ``schema`` migrated to its latest version.

    Raises:
        StateSchemaError: The file is newer than this governor, or a migration failed.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA busy_timeout=5000")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    try:
        migrate(db, path, schema)
    except BaseException:
        db.close()
        raise
    return db


def migrate(db: sqlite3.Connection, path: Path, schema: Schema) -> int:
    """Apply the migrations ``schema`` has and the file lacks; return the version before."""
    db.execute(VERSIONS_TABLE)
    found = schema_version(db, schema.component)
    if found > schema.version:
        message = (
            f"{path}: the {schema.component} tables are at schema version {found}, newer than "
            f"this governor's {schema.version}; run the newer governor (or restore its state)"
        )
        raise StateSchemaError(message)
    for version in range(found, schema.version):
        try:
            with transaction(db):
                for statement in _statements(schema.migrations[version]):
                    db.execute(statement)
                db.execute(
                    "INSERT INTO schema_versions VALUES (?, ?) ON CONFLICT (component)"
                    " DO UPDATE SET version = excluded.version",
                    (schema.component, version + 1),
                )
        except sqlite3.Error as exc:
            message = (
                f"{path}: migrating the {schema.component} tables to version {version + 1} "
                f"failed ({exc}); the file is left at version {version}"
            )
            raise StateSchemaError(message) from exc
    return found


def schema_version(db: sqlite3.Connection, component: str) -> int:
    """The version ``component`` is at in this file (0: never migrated)."""
    row = db.execute(
        "SELECT version FROM schema_versions WHERE component = ?", (component,)
    ).fetchone()
    return 0 if row is None else int(row[0])


def _statements(script: str) -> Iterator[str]:
    """The statements of ``script``, one at a time (``executescript`` would commit first)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending.strip()
            pending = ""
    if pending.strip():
        yield pending.strip()


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
