"""The ``notify`` action: a checked template, filled from the evidence, paced like an action."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.core.errors import ConfigError
from daemon.policy.decisions import Decision, DecisionKind
from daemon.policy.evaluate import TargetView, evaluate
from daemon.policy.loading import parse_policy
from daemon.policy.notify_text import render, template_problems
from daemon.policy.state import PolicyState
from daemon.policy.tick import tick

WALL = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
NOTIFY = """\
name: kv-high
when: kv_usage > 0.9 && running > 10.0
for: 10s
cooldown: 5m
action:
  notify:
    text: "{{policy}}: KV {kv_usage} with {running} running on {target} for {held_for}"
    channels: [mqtt, slack, mqtt]
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_policy(text, Path("p.yaml"))
    return [issue.render() for issue in caught.value.issues]


def test_a_notify_action_loads_as_an_auto_action_with_its_channels_once_each() -> None:
    spec = parse_policy(NOTIFY, Path("p.yaml"))
    assert spec.action is not None
    assert spec.action.notify is not None
    assert spec.action.notify.channels == ("mqtt", "slack")
    assert spec.action.risk == "auto"
    assert spec.action.changes == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{ttft_p95_s}", "{ttft_p95_s} is not a signal the condition reads"),
        ("{__class__}", "{__class__} is not a signal the condition reads"),
        ("{kv_usage.__class__}", "{kv_usage.__class__} is not a field name"),
        ("{kv_usage!r}", "{kv_usage!r} is not a field name"),
        ("load {", "an unmatched brace"),
    ],
)
def test_a_template_may_name_only_what_the_condition_reads(text: str, expected: str) -> None:
    policy = f"name: p\nwhen: kv_usage > 0.9\naction: {{notify: {{text: {text!r}}}}}\n"
    [problem] = _problems(policy)
    assert problem.startswith("p.yaml:3:"), problem
    assert f"action.notify.text: {expected}" in problem


def test_notify_is_one_action_and_its_channels_are_known() -> None:
    both = "name: p\nwhen: kv_usage > 0.9\naction: {notify: {text: hi}, operation: restart}\n"
    assert "an action does exactly one thing" in _problems(both)[0]
    mail = "name: p\nwhen: kv_usage > 0.9\naction: {notify: {text: hi, channels: [mail]}}\n"
    assert any("action.notify.channels.0: expected 'mqtt' or 'slack'" in p for p in _problems(mail))
    empty = "name: p\nwhen: kv_usage > 0.9\naction: {notify: {text: ''}}\n"
    assert "action.notify.text" in _problems(empty)[0]


def test_rendering_fills_values_and_nothing_else() -> None:
    assert template_problems("{{literal}} {a}", {"a"}) == []
    assert render("{{literal}} {a} {b} {m}", {"a": 0.81251, "m": {"/": 0.9, "/var": 1}}) == (
        "{literal} 0.8125 no data /=0.9, /var=1"
    )


def test_a_firing_policy_notifies_once_then_again_only_after_its_cooldown() -> None:
    spec = parse_policy(NOTIFY, Path("p.yaml"))
    hot = TargetView("main", {"kv_usage": 0.95, "running": 12.0}, {})
    state, seen = PolicyState(), list[tuple[int, Decision]]()
    for now in range(0, 400, 5):
        state, decisions = evaluate(spec, state, hot, float(now), WALL)
        seen.extend((now, d) for d in decisions if d.kind is DecisionKind.NOTIFY)
    assert [now for now, _ in seen] == [10, 310], "on firing, then once per 5 min cooldown"
    first = seen[0][1]
    assert first.details == {
        "text": "{policy}: KV 0.95 with 12 running on main for 10 s",
        "channels": ["mqtt", "slack"],
    }
    assert first.evidence.signals == {"kv_usage": 0.95, "running": 12.0}


def test_each_firing_notifies_again_and_the_planner_never_sees_it() -> None:
    spec = parse_policy(NOTIFY.replace("for: 10s", "for: 0s"), Path("p.yaml"))
    hot = {"main": TargetView("main", {"kv_usage": 0.95, "running": 12.0}, {})}
    calm = {"main": TargetView("main", {"kv_usage": 0.5, "running": 12.0}, {})}
    states: dict[tuple[str, str], PolicyState] = {}
    kinds = []
    for now, views in enumerate([hot, hot, calm, hot, hot]):
        result = tick(
            [spec], states, views, envelopes={}, history={}, now=float(now) * 150, wall=WALL
        )
        states = result.states
        assert result.accepted == ()
        kinds.append([d.kind.value for d in result.decisions])
    assert kinds == [["fired", "notify"], [], ["resolved"], ["fired", "notify"], []]


def test_a_shadow_notify_policy_only_records_what_it_would_say() -> None:
    spec = parse_policy(NOTIFY + "mode: shadow\n", Path("p.yaml"))
    hot = TargetView("main", {"kv_usage": 0.95, "running": 12.0}, {})
    state, _ = evaluate(spec, PolicyState(), hot, 0.0, WALL)
    _, decisions = evaluate(spec, state, hot, 10.0, WALL)
    [shadow] = [d for d in decisions if d.kind is DecisionKind.SHADOW]
    assert shadow.details["text"].endswith("on main for 10 s")


def test_a_restart_operation_needs_approval_unless_it_says_otherwise() -> None:
    restart = "name: p\nwhen: kv_usage > 0.9\naction: {operation: restart}\n"
    spec = parse_policy(restart, Path("p.yaml"))
    assert spec.action is not None
    assert (spec.action.operation, spec.action.risk) == ("restart", "approval")
    auto = parse_policy(restart.replace("restart}", "restart, risk: auto}"), Path("p.yaml"))
    assert auto.action is not None
    assert auto.action.risk == "auto"
