"""Every panel of the governor's dashboard shows data from a real governor, via a real Prometheus.

Everything is real: ``sim serve`` behind HAProxy (its cap 12, above the server's max-num-seqs
of 8, so the gate's fast loop has something to do), the daemon as a subprocess watching both,
and Prometheus scraping the daemon every second with the governor's alerting rules loaded.
The scenario makes the events the panels count happen, none of them by hand-written metrics:

* a freeze file on ``main`` (written before the start, as an operator would with ``touch``):
  the frozen gauge shows it, and the changes below are refused by it;
* ``more-seqs`` (risk auto) asks to double max-num-seqs: a change, refused (the freeze);
* the gate's loop tries to clamp the cap to 8: a cap change, refused (the freeze);
* ``ask-restart`` (risk approval) proposes a restart, which nobody answers: it expires;
* ``busy-note`` notifies (over MQTT, which is not configured: ``no_channel``), then meets its
  hourly budget of one: a decision blocked by ``budget``.

Then each query of the committed dashboard JSON, its variables set as Grafana would (``job``
to the scrape job, ``instance`` to All), must return at least one series; no query falls back
to ``or vector(0)``. The alerts those events should raise are firing in the same Prometheus.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.daemon import RunningDaemon, running_daemon, write_config
from tests.support.haproxy import BACKEND, SERVER, Haproxy, render_reference_config
from tests.support.prometheus import Prometheus
from tests.support.services import free_port, require_command
from tests.support.sim_serve import SimProcess, sim_serve

pytestmark = [
    pytest.mark.service("prometheus"),
    pytest.mark.service("haproxy"),
    pytest.mark.slow,
    pytest.mark.timeout(180),
]

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "monitoring" / "vllm-governor.dashboard.json"
RULES = ROOT / "monitoring" / "vllm-governor.rules.yaml"
JOB = "vllm-governor"  # the job the rules select, and the dashboard's job variable here
VARIABLES = {"$job": JOB, "$instance": ".*"}  # instance: All, whose value is .*

POLICIES = {
    "more-seqs": """\
name: more-seqs
targets: [main]
when: running >= 0.0
action:
  set: {max_num_seqs: "current * 2.0"}
  risk: auto
cooldown: 1h
""",
    "ask-restart": """\
name: ask-restart
targets: [main]
when: running >= 0.0
for: 2s
action:
  operation: restart
  risk: approval
cooldown: 1h
""",
    "busy-note": """\
name: busy-note
targets: [main]
when: running >= 0.0
action:
  notify:
    text: "{target} runs {running} requests"
    channels: [mqtt]
cooldown: 1s
budget_per_hour: 1
""",
}


def _config(directory: Path, sim: SimProcess, stats_socket: Path) -> Path:
    policies = directory / "policies"
    policies.mkdir()
    for name, text in POLICIES.items():
        (policies / f"{name}.yaml").write_text(text)
    extra = f"""\
[approvals]
expiry_s = 3.0
sweep_interval_s = 0.5
[sources.nvml]
enabled = false
[sources.host]
enabled = false
[[vllm]]
name = "main"
url = "http://127.0.0.1:{sim.port}"
scrape_interval_s = 0.5
config_path = "{directory / "vllm.yaml"}"
restart_command = ["true"]
[vllm.knobs.max_num_seqs]
min = 4
max = 16
max_step = 16
min_dwell_s = 0
[vllm.gate]
enabled = true
stats_socket = "{stats_socket}"
backend = "{BACKEND}"
server = "{SERVER}"
interval_s = 0.5
timeout_s = 0.5
stale_after_s = 2.0
"""
    config = write_config(directory, extra=extra)
    text = config.read_text().replace("policy_dirs = []", f'policy_dirs = ["{policies}"]')
    config.write_text(text.replace("[governor]\n", "[governor]\nevaluation_interval_s = 0.5\n"))
    return config


def _metrics_port(config: Path) -> int:
    return int(re.findall(r"^listen_port = (\d+)$", config.read_text(), re.MULTILINE)[0])


def _rules_every_second(directory: Path) -> Path:
    """The shipped rules, evaluated every second instead of at Prometheus's default minute."""
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for group in document["groups"]:
        group["interval"] = "1s"
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@contextmanager
def _running(directory: Path) -> Iterator[tuple[RunningDaemon, Prometheus]]:
    state = directory / "state"
    state.mkdir()
    until = datetime.now(UTC) + timedelta(hours=1)
    (state / "freeze.main").write_text(f"{until.isoformat()}\nmonitoring test\n")
    stats_socket = directory / "haproxy.sock"
    with sim_serve(directory, "max-num-seqs: 8\n") as sim:
        rendered = render_reference_config(
            frontend_port=free_port(),
            server_port=sim.port,
            stats_socket=stats_socket,
            maxconn=12,
        )
        config = _config(directory, sim, stats_socket)
        prometheus = Prometheus(
            require_command("prometheus"),
            directory / "prometheus",
            f"127.0.0.1:{_metrics_port(config)}",
            rule_files=[_rules_every_second(directory)],
            job=JOB,
        )
        with (
            Haproxy(require_command("haproxy"), directory, rendered, stats_socket),
            running_daemon(config) as daemon,
        ):
            daemon.wait_for("READY=1")
            with prometheus:
                yield daemon, prometheus


def _query(prometheus: Prometheus, expr: str) -> list[dict[str, Any]]:
    status, body = prometheus.get("/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert status == 200, f"{expr}: HTTP {status} {body[:500]!r}"
    result: list[dict[str, Any]] = json.loads(body)["data"]["result"]
    return result


def _panel_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL with the variables set) for every query of every panel."""
    model = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queries = []
    for panel in model["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in VARIABLES.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, f"{panel['title']}: a variable the test does not set"
            queries.append((panel["title"], expr))
    return queries


def _firing(prometheus: Prometheus) -> dict[str, list[dict[str, str]]]:
    status, body = prometheus.get("/api/v1/alerts")
    assert status == 200
    firing: dict[str, list[dict[str, str]]] = {}
    for alert in json.loads(body)["data"]["alerts"]:
        if alert["state"] == "firing":
            firing.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
    return firing


def _until(check: Any, what: str, daemon: RunningDaemon, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        outcome = check()
        if not outcome[1]:
            return outcome[0]
        if time.monotonic() > deadline or daemon.process.poll() is not None:
            raise AssertionError(f"{what}: {outcome[1]}\nlog:\n{daemon.log_text()[-6000:]}")
        time.sleep(0.5)


def test_every_panel_of_the_dashboard_shows_data_from_a_real_governor(short_tmp: Path) -> None:
    queries = _panel_queries()
    assert len(queries) >= 20
    with _running(short_tmp) as (daemon, prometheus):

        def empty_panels() -> tuple[None, list[str]]:
            return None, [
                f"{title}: {expr}" for title, expr in queries if not _query(prometheus, expr)
            ]

        _until(empty_panels, "panels without data", daemon)

        # The values behind the panels are the scenario's, not just any.
        def value(expr: str) -> dict[str, float]:
            return {
                ",".join(f"{k}={v}" for k, v in sorted(r["metric"].items())): float(r["value"][1])
                for r in _query(prometheus, expr)
            }

        def scenario() -> tuple[None, list[str]]:
            wrong = []
            expected = {
                f'vllm_governor_frozen{{job="{JOB}"}}': 1.0,
                f'vllm_governor_quarantines{{job="{JOB}"}}': 0.0,
                f'vllm_governor_config_last_reload_successful{{job="{JOB}"}}': 1.0,
                f'sum(vllm_governor_actuations_total{{job="{JOB}", target="main", state="refused"}})': None,
                f'sum(vllm_governor_actuation_refusals_total{{job="{JOB}", target="main"}})': None,
                f'sum(vllm_governor_approval_outcomes_total{{job="{JOB}", state="expired"}})': None,
                f'sum(vllm_governor_decisions_total{{job="{JOB}", policy="busy-note", guard="budget"}})': None,
                f'sum(vllm_governor_gate_cap_changes_total{{job="{JOB}", target="main", outcome="refused"}})': None,
                f'sum(vllm_governor_notifications_total{{job="{JOB}", channel="mqtt", outcome="no_channel"}})': None,
            }
            for expr, want in expected.items():
                got = list(value(expr).values())
                if not got or (want is None and got[0] < 1) or (want is not None and got != [want]):
                    wrong.append(f"{expr} = {got}, wanted {'>= 1' if want is None else want}")
            return None, wrong

        _until(scenario, "the scenario's values", daemon)

        # The alerts those events raise, in the same Prometheus, from the shipped rules.
        def alerts() -> tuple[dict[str, list[dict[str, str]]], list[str]]:
            firing = _firing(prometheus)
            wanted = {"VllmGovernorBudgetExhausted", "VllmGovernorProposalsExpired"}
            return firing, sorted(wanted - set(firing))

        firing = _until(alerts, "alerts not firing", daemon)
        assert set(firing) == {"VllmGovernorBudgetExhausted", "VllmGovernorProposalsExpired"}
        [budget] = firing["VllmGovernorBudgetExhausted"]
        assert (budget["policy"], budget["guard"], budget["severity"]) == (
            "busy-note",
            "budget",
            "warning",
        )

        # Every metric the rules read is one the governor exports.
        names = set(re.findall(r"\b(vllm_governor_\w+)", RULES.read_text(encoding="utf-8")))
        missing = [name for name in sorted(names) if not _query(prometheus, name)]
        assert missing == []
