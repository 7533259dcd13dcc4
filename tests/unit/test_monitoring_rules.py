"""The governor's alerting rules, checked and unit-tested with the real ``promtool``.

``promtool check rules`` parses every expression and template; ``promtool test rules`` runs the
cases of ``monitoring/vllm-governor.rules.test.yaml`` on a fake clock. The other tests here hold
the file to its own promises: every alert fires in one case and stays quiet in another, and
carries ``for``, a severity and a one-line runbook. Without promtool (Debian's ``prometheus``
package) the promtool tests skip, or fail when ``CI=true``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.services import require_command

pytestmark = pytest.mark.service("promtool")

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "monitoring" / "vllm-governor.rules.yaml"
RULE_TESTS = ROOT / "monitoring" / "vllm-governor.rules.test.yaml"
SEVERITIES = {"critical", "warning", "info"}


def _alerts() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"] if "alert" in rule]


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_command("promtool"), *args],
        cwd=RULES.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_promtool_checks_the_rules() -> None:
    checked = _promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in checked.stdout


def test_promtool_runs_the_rules_unit_tests() -> None:
    tested = _promtool("test", "rules", RULE_TESTS.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_fires_in_a_case_and_stays_quiet_in_another() -> None:
    document = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))
    assert document["rule_files"] == [RULES.name]
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in document["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {alert["alert"] for alert in _alerts()}
    assert names - fires == set(), "alerts with no case where they fire"
    assert names - quiet == set(), "alerts with no case where they stay quiet"
    assert (fires | quiet) - names == set(), "cases of alerts the rules do not have"


@pytest.mark.parametrize("alert", _alerts(), ids=lambda alert: alert["alert"])
def test_every_alert_says_how_long_how_bad_what_and_what_to_run(alert: dict[str, Any]) -> None:
    assert "for" in alert, "say how long the condition must hold, 0m included"
    assert alert["labels"]["severity"] in SEVERITIES
    annotations = alert["annotations"]
    assert set(annotations) == {"summary", "description", "runbook"}
    assert "\n" not in annotations["runbook"].strip(), "a runbook is one line"
    assert 'job="vllm-governor"' in alert["expr"], "every rule selects the governor's job"
