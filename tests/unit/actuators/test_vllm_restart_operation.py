"""A restart without a config change: planned with the files unchanged, held to its envelope."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from actuators.vllm.atomic_files import FileSnapshot
from actuators.vllm.plan import make_plan, render_plan
from actuators.vllm.preflight import preflight
from actuators.vllm.registry import V0_33
from daemon.api import ChangeRequest, VllmInstance

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
YAML = Path("/etc/vllm/main.yaml")
SERVER = VllmInstance(
    name="main",
    url="http://127.0.0.1:8000",
    unit="vllm@main.service",
    config_path=YAML,
    restart_hourly_budget=2,
    restart_min_interval_s=600,
)
RESTART = ChangeRequest("main", "stuck", {}, {}, "stuck: waiting > 50 held", operation="restart")


def refusals(restarted_minutes_ago: list[float], request: ChangeRequest = RESTART) -> list[str]:
    plan = make_plan(
        SERVER, request, V0_33, FileSnapshot(YAML, True, "max-num-seqs: 8\n", 0o644), None
    )
    restarted = [NOW - timedelta(minutes=m) for m in restarted_minutes_ago]
    found = preflight(
        SERVER, request, plan, V0_33, frozen="", changed_at={}, now=NOW, restarted_at=restarted
    )
    return [guard for guard, _ in found]


def test_a_restart_plans_no_file_change_and_says_so() -> None:
    plan = make_plan(
        SERVER, RESTART, V0_33, FileSnapshot(YAML, True, "max-num-seqs: 8\n", 0o644), None
    )
    assert not any(change.changed for change in plan.files)
    assert plan.knobs == {}
    assert plan.as_json()["operation"] == "restart"
    shown = render_plan(plan.as_json())
    assert "operation: restart, no config change" in shown
    assert '"systemctl", "restart", "vllm@main.service"' in shown


def test_a_restart_passes_where_a_change_without_a_diff_is_refused() -> None:
    assert refusals([]) == []
    assert refusals([], ChangeRequest("main", "p", {}, {})) == ["no_change"]


def test_the_restart_envelope_limits_restarts_per_hour_and_their_spacing() -> None:
    assert refusals([30]) == []
    assert refusals([5]) == ["dwell"]
    assert refusals([50, 20]) == ["restart_budget"]
    assert refusals([90, 70]) == [], "restarts more than an hour ago do not count"
