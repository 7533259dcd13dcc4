"""A condition that fails to evaluate is an error, its own state: never "no data", never a crash."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.core.errors import ConfigError
from daemon.policy.decisions import DecisionKind
from daemon.policy.evaluate import TargetView, condition_result, evaluate
from daemon.policy.loading import parse_policy
from daemon.policy.state import Phase, PolicyState

WALL = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
HUNDRED = "[" + ", ".join(str(i) for i in range(100)) + "]"
# check cannot refuse this one: without data the guard is no data and the loops never run.
GUARDED = f"kv_usage > 0.5 ? {HUNDRED}.all(i, {HUNDRED}.all(j, i + j >= 0)) : false"


def _view(**signals: float) -> TargetView:
    return TargetView("main", signals, {})


def test_check_refuses_a_comprehension_past_the_budget() -> None:
    text = f"name: p\nwhen: '{HUNDRED}.all(i, {HUNDRED}.all(j, kv_usage > 0.5))'\n"
    with pytest.raises(ConfigError) as raised:
        parse_policy(text, Path("p.yaml"))
    (issue,) = raised.value.issues
    assert "CEL's budget of 10,000 steps" in issue.message
    assert issue.key_path == "when"


def test_a_comprehension_within_the_budget_loads() -> None:
    fifty = "[" + ", ".join(str(i) for i in range(50)) + "]"
    parse_policy(f"name: p\nwhen: '{fifty}.all(i, {fifty}.all(j, kv_usage > 0.5))'\n", Path("p"))


def test_the_budget_overrun_at_run_time_is_an_error_state_recorded_once() -> None:
    spec = parse_policy(f"name: p\nwhen: '{GUARDED}'\n", Path("p.yaml"))
    state, decisions = evaluate(spec, PolicyState(), _view(kv_usage=0.9), 0.0, WALL)
    (error,) = decisions
    assert error.kind is DecisionKind.ERROR
    assert "iteration budget exceeded" in error.details["error"]
    assert state.error == error.details["error"]
    assert state.phase is Phase.INACTIVE  # it holds
    again, more = evaluate(spec, state, _view(kv_usage=0.9), 5.0, WALL)
    assert (again, more) == (state, [])
    recovered, _ = evaluate(spec, state, _view(kv_usage=0.1), 10.0, WALL)
    assert recovered.error is None


def test_an_error_holds_a_firing_policy_whatever_on_no_data_says() -> None:
    text = "name: p\nwhen: int(waiting) / int(running) > 1\non_no_data: assume_ok\n"
    spec = parse_policy(text, Path("p.yaml"))
    firing = PolicyState(Phase.FIRING, 0.0)
    state, decisions = evaluate(spec, firing, _view(waiting=5.0, running=0.0), 1.0, WALL)
    assert [d.kind for d in decisions] == [DecisionKind.ERROR]
    assert "divide by zero" in decisions[0].details["error"]
    assert state.phase is Phase.FIRING


def test_missing_data_is_still_no_data_not_an_error() -> None:
    spec = parse_policy("name: p\nwhen: int(waiting) / int(running) > 1\n", Path("p.yaml"))
    state, decisions = evaluate(spec, PolicyState(), _view(waiting=5.0), 0.0, WALL)
    assert (state, decisions) == (PolicyState(), [])
    assert condition_result(spec.when, _view(waiting=5.0)) == ("no_data", None)
    result, message = condition_result(spec.when, _view(waiting=5.0, running=0.0))
    assert result == "error"
    assert message is not None
    assert "divide by zero" in message
    assert condition_result(spec.when, _view(waiting=5.0, running=1.0)) == ("true", None)


def test_an_action_reading_an_absent_map_key_is_blocked_for_no_data() -> None:
    text = (
        "name: p\nwhen: kv_usage > 0.9\n"
        "action:\n  set: {max_num_seqs: 'current - gpu_temperature_celsius[\"7\"]'}\n"
    )
    spec = parse_policy(text, Path("p.yaml"))
    view = TargetView("main", {"kv_usage": 0.95, "gpu_temperature_celsius": {"0": 1.0}}, {})
    view = TargetView(view.target, view.signals, {"max_num_seqs": 256.0})
    _, decisions = evaluate(spec, PolicyState(), view, 0.0, WALL)
    assert [d.guard for d in decisions if d.kind is DecisionKind.BLOCKED] == ["no_data"]
