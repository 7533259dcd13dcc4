"""The journal entry of a tuned change carries its counterfactual (issue 16).

The Slack message and ``proposals`` showed what the what-if predicted; the audit log of the
change did not. A tuned intent's request carries the forecast, the journal keeps it with the
entry (schema version 2 of ``actuations``), a file from version 1 keeps its entries, and
``status`` shows it under the change as ``proposals`` does under the proposal.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from daemon.app.commands.status import render
from daemon.approvals.forecast import Forecast, Outcome, Percentiles
from daemon.core.actuation import DONE
from daemon.engine.actuation.routing import request_of
from daemon.engine.storage.journal_store import SCHEMA, SqliteJournal
from daemon.engine.storage.state_db import schema_version
from daemon.policy.decisions import Decision, DecisionKind, Evidence, Intent

FORECAST = Forecast(
    objective="goodput",
    predicted_gain=0.24,
    now=Outcome(slo_attainment=0.62, goodput_rps=4.9),
    after=Outcome(slo_attainment=0.96, goodput_rps=7.7),
    restart_downtime_s=45.0,
    requests_lost=360.0,
    window_s=600.0,
    rate_rps=8.0,
    prompt_tokens=Percentiles(4000, 8800, 13200),
    output_tokens=Percentiles(60, 150, 225),
    profile="llama-3.1-8b-h100-tp1",
)


class Clock:
    def monotonic(self) -> float:
        return 0.0

    def wall(self) -> datetime:
        return datetime(2026, 12, 2, 4, 0, tzinfo=UTC)


def _tuned() -> Decision:
    # The decision's ``whatif`` details hold more than the forecast (the round's candidates,
    # the SLO); the journal keeps the forecast's own shape.
    whatif = {**FORECAST.to_json(), "slo": {"ttft_s": 2.0, "tpot_s": 0.05}, "candidates": []}
    return Decision(
        policy="tpot-tune",
        target="main",
        at=0.0,
        kind=DecisionKind.INTENT,
        evidence=Evidence("tpot_p95_s > 0.05", {"tpot_p95_s": 0.15}, 120.0),
        intent=Intent(
            {"max_num_batched_tokens": 2048.0}, {"max_num_batched_tokens": 8192.0}, None, "approval"
        ),
        details={"whatif": whatif},
    )


def test_an_applied_tuned_change_keeps_its_forecast_in_the_journal(tmp_path: Path) -> None:
    request = request_of(_tuned())
    assert request.forecast == FORECAST.to_json()
    path = tmp_path / "state.sqlite3"
    journal = SqliteJournal(path, Clock())
    entry = journal.begin("main", request.policy, {"knobs": {}}, {}, request.forecast)
    journal.finish(entry.id, DONE, "verified", {})
    journal.close()

    journal = SqliteJournal(path, Clock())
    kept = journal.entry(entry.id)
    assert kept is not None
    assert kept.forecast is not None
    assert Forecast.from_json(kept.forecast) == FORECAST
    untuned = journal.begin("other", "kv-pressure", {}, {})
    assert untuned.forecast is None
    journal.close()


def test_a_journal_from_version_1_keeps_its_entries_without_a_forecast(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA.migrations[0])
    old.execute(
        "CREATE TABLE schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
    )
    old.execute("INSERT INTO schema_versions VALUES ('actuations', 1)")
    old.execute(
        "INSERT INTO actuations (target, policy, state, step, plan, facts, started_at)"
        " VALUES ('main', 'p', 'done', 'done', '{}', '{}', 1.0)"
    )
    old.commit()
    old.close()

    journal = SqliteJournal(path, Clock())
    (entry,) = journal.recent()
    assert (entry.policy, entry.forecast) == ("p", None)
    journal.close()
    db = sqlite3.connect(path)
    assert schema_version(db, "actuations") == SCHEMA.version == 2
    db.close()


def test_status_shows_a_journaled_change_with_what_it_was_predicted_to_buy() -> None:
    change = {
        "id": 7,
        "target": "main",
        "policy": "tpot-tune",
        "state": DONE,
        "step": DONE,
        "outcome": "verified",
        "timings": {},
        "forecast": FORECAST.to_json(),
    }
    status = {
        "version": "test",
        "pid": 1,
        "state": "running",
        "uptime_s": 60.0,
        "config_path": "/etc/vllm-governor/config.toml",
        "actuations": [change],
    }
    text = render(status)

    assert "#7 tpot-tune on main: done: verified" in text
    assert f"predicted: {FORECAST.effect_text()}" in text
    assert f"cost: {FORECAST.cost_text()}" in text
    assert f"workload: {FORECAST.workload_text()}" in text
