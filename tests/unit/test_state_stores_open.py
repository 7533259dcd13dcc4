"""Every SQLite store is opened through the one opener: WAL, FULL sync, versioned migrations."""

from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

from daemon.core.clock import SystemClock
from daemon.engine.storage import batch_ledger, cap_journal, journal_store, proposal_store
from daemon.engine.storage import state_store as policy_states
from daemon.engine.storage.state_db import schema_version

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("daemon", "actuators", "simulator")
OPENER = Path("daemon/engine/storage/state_db.py")


def sqlite_openings(source: str) -> list[int]:
    """Lines that call ``sqlite3.connect`` (or ``connect`` imported from sqlite3)."""
    tree = ast.parse(source)
    bare = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "sqlite3"
        for alias in node.names
        if alias.name == "connect"
    }
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        dotted = (
            isinstance(func, ast.Attribute)
            and func.attr == "connect"
            and isinstance(func.value, ast.Name)
            and func.value.id == "sqlite3"
        )
        if dotted or (isinstance(func, ast.Name) and func.id in bare):
            lines.append(node.lineno)
    return lines


def test_the_scan_finds_both_spellings() -> None:
    source = "import sqlite3\nfrom sqlite3 import connect as c\nsqlite3.connect('a')\nc('b')\n"
    assert sqlite_openings(source) == [3, 4]


def test_no_product_module_opens_sqlite_but_the_state_db_opener() -> None:
    found = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative == OPENER:
                continue
            found += [f"{relative}:{line}" for line in sqlite_openings(path.read_text())]
    assert found == [], "open SQLite through daemon.engine.storage.state_db.connect"


def test_every_store_shares_one_file_in_wal_at_its_latest_version(tmp_path: Path) -> None:
    path = tmp_path / "state" / "state.sqlite3"
    clock = SystemClock()
    stores: list[
        policy_states.StateStore
        | journal_store.SqliteJournal
        | proposal_store.ProposalStore
        | cap_journal.SqliteCapJournal
        | batch_ledger.BatchLedger
    ] = [
        policy_states.StateStore(path),
        journal_store.SqliteJournal(path, clock),
        proposal_store.ProposalStore(path),
        cap_journal.SqliteCapJournal(path, clock),
        batch_ledger.BatchLedger(path),
    ]
    for store in stores:
        store.close()
    schemas = [
        module.SCHEMA
        for module in (policy_states, journal_store, proposal_store, cap_journal, batch_ledger)
    ]
    assert len({schema.component for schema in schemas}) == len(schemas)
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        for schema in schemas:
            assert schema_version(db, schema.component) == schema.version, schema.component
    finally:
        db.close()
