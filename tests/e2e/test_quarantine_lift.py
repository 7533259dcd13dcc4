"""People list and lift quarantines through the CLI; the running daemon audits each lift."""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
from pathlib import Path

from daemon.core.clock import SystemClock
from daemon.engine.storage.journal_store import SqliteJournal
from tests.support.daemon import running_daemon, write_config


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.app.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


def test_a_quarantine_is_listed_lifted_with_a_reason_and_audited(short_tmp: Path) -> None:
    config = write_config(short_tmp)
    state = short_tmp / "state" / "state.sqlite3"
    journal = SqliteJournal(state, SystemClock())
    journal.quarantine("more-seqs", "sim", "reverted: ttft_p95_s 3.1 > 1.5x 1.0", 7)
    journal.quarantine("kv-thrash", "sim", "reverted: errors", None)
    journal.close()
    with running_daemon(config) as daemon:
        daemon.wait_for("READY=1")
        listed = _cli("quarantine", "--json", "--config", str(config))
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)["quarantined"]
        assert {(r["policy"], r["target"], r["actuation"]) for r in rows} == {
            ("more-seqs", "sim", 7),
            ("kv-thrash", "sim", None),
        }
        missing = _cli(
            "unquarantine", "more-seqs", "other", "--reason", "x", "--config", str(config)
        )
        assert missing.returncode != 0
        assert "more-seqs is not quarantined on other" in missing.stderr
        no_reason = _cli("unquarantine", "more-seqs", "sim", "--config", str(config))
        assert no_reason.returncode != 0, "a lift needs a reason"
        lifted = _cli(
            "unquarantine", "more-seqs", "sim", "--reason", "KV cache resized", "--config",
            str(config),
        )  # fmt: skip
        assert lifted.returncode == 0, lifted.stderr
        assert "more-seqs may act on sim again" in lifted.stdout
        shown = _cli("quarantine", "--config", str(config))
        assert shown.returncode == 0, shown.stderr
        assert "kv-thrash on sim since" in shown.stdout
        assert "more-seqs on sim since" not in shown.stdout
        assert "lifted: more-seqs on sim at " in shown.stdout
        assert f"by {getpass.getuser()}: KV cache resized" in shown.stdout
        again = _cli("unquarantine", "more-seqs", "sim", "--reason", "x", "--config", str(config))
        assert again.returncode != 0, "a lift is single-use"
    journal = SqliteJournal(state, SystemClock())
    try:
        assert set(journal.quarantined()) == {("kv-thrash", "sim")}
        [audit] = journal.quarantine_lifts()
        assert audit["reason"].startswith("reverted: ttft_p95_s")
        assert (audit["actuation"], audit["why"]) == (7, "KV cache resized")
    finally:
        journal.close()
    assert any(r["msg"] == "quarantine lifted" for r in daemon.log_records())
