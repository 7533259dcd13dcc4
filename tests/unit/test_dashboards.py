"""The committed Grafana dashboard is the generated one, and is well formed.

Whether each panel's query returns data from a real governor is tested in
``tests/e2e/test_monitoring_dashboard.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from daemon.app.cli import main
from daemon.app.dashboards import dashboard, render

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "monitoring" / "vllm-governor.dashboard.json"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}


def _panels() -> list[dict[str, Any]]:
    return [panel for panel in dashboard()["panels"] if panel["type"] != "row"]


def test_the_committed_dashboard_is_the_generated_one() -> None:
    committed = COMMITTED.read_text(encoding="utf-8")
    assert committed == render(dashboard()), f"regenerate: vllm-governor dashboard > {COMMITTED}"


def test_the_command_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboard"]) == 0
    assert capsys.readouterr().out == render(dashboard())


def test_its_data_source_is_a_variable_and_its_queries_select_job_and_instance() -> None:
    model = dashboard()
    variables = {variable["name"]: variable for variable in model["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    assert variables["instance"]["allValue"] == ".*"
    assert isinstance(model["schemaVersion"], int)
    for panel in _panels():
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["description"], panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE
            assert 'job=~"$job", instance=~"$instance"' in target["expr"], panel["title"]
            assert "vector(" not in target["expr"], "no made-up zeros: a panel shows data"


def test_ids_are_unique_and_panels_do_not_overlap() -> None:
    model = dashboard()
    ids = [panel["id"] for panel in model["panels"]]
    assert len(ids) == len(set(ids))
    taken: set[tuple[int, int]] = set()
    for panel in model["panels"]:
        position = panel["gridPos"]
        assert position["x"] + position["w"] <= 24, panel["title"]
        cells = {
            (x, y)
            for x in range(position["x"], position["x"] + position["w"])
            for y in range(position["y"], position["y"] + position["h"])
        }
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells
    for panel in _panels():
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]


def test_it_shows_what_an_on_call_engineer_asks_about_the_governor() -> None:
    shown = {
        name
        for panel in _panels()
        for target in panel["targets"]
        for name in re.findall(r"\b(up|vllm_governor_\w+)\{", target["expr"])
    }
    asked = {
        "up",  # is it up
        "vllm_governor_ready",  # is it ready
        "vllm_governor_source_up",  # can it see
        "vllm_governor_source_polls_total",
        "vllm_governor_policy_errors",  # can it decide
        "vllm_governor_decisions_total",  # what it decided, budgets included
        "vllm_governor_actuations_total",  # what it did
        "vllm_governor_quarantines",
        "vllm_governor_frozen",
        "vllm_governor_config_last_reload_successful",
        "vllm_governor_config_reloads_total",
        "vllm_governor_gate_cap",
        "vllm_governor_proposals_pending",
        "vllm_governor_approval_outcomes_total",
    }
    assert asked - shown == set()
    budgets = [p for p in _panels() if "budget|knob_budget" in p["targets"][0]["expr"]]
    assert budgets, "a panel of the budgets"


def test_the_committed_file_is_valid_json_for_grafana() -> None:
    model = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert model["uid"] == "vllm-governor"
    assert all("gridPos" in panel for panel in model["panels"])
