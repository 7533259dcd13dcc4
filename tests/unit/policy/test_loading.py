"""Bad policy input: a clear, located error; nothing else lost."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.core.errors import ConfigError
from daemon.policy.decisions import DecisionKind
from daemon.policy.evaluate import TargetView, evaluate
from daemon.policy.loading import load_policies, load_policy, parse_policy
from daemon.policy.state import PolicyState

GOOD = "name: good\nwhen: kv_usage > 0.9\n"


def _problem(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_policy(text, Path("p.yaml"))
    return caught.value.issues[0].render()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: p\nwhen: [unclosed\n", "p.yaml:3:1: YAML syntax error:"),
        ("- a list\n", "p.yaml:1:1: the top level must be a mapping, not seq"),
        ("", "p.yaml:1:1: the top level must be a mapping, not empty"),
        (
            "name: p\nwhen: kv_usage > 0.9\nfor: soon\n",
            "p.yaml:3:1: for: 'soon' is not a duration",
        ),
        (
            "name: p\nwhen: kv_usage > 0.9\nbudget_per_hour: many\n",
            "p.yaml:3:1: budget_per_hour: expected a whole number",
        ),
        ("name: Bad Name\nwhen: kv_usage > 0.9\n", "p.yaml:1:1: name: must match the pattern"),
        ("when: kv_usage > 0.9\n", "p.yaml:1:1: name: required key is missing"),
        (
            "name: p\nwhen: gpu_tempreature > 1.0\n",
            "p.yaml:2:1: when: unknown signal or function 'gpu_tempreature'",
        ),
        (
            "name: p\nwhen: kv_usage > 0.9\naction: {operation: restart, set: {max_num_seqs: 1}}\n",
            "p.yaml:3:1: action: an action does exactly one thing",
        ),
        (
            "name: p\nwhen: kv_usage > 0.9\nschedule: {windows: [{cron: '61 * * * *', duration: 1h}]}\n",
            "p.yaml:3:23: schedule.windows.0.cron: cron expression '61 * * * *'",
        ),
        ("a: &x [1, 2]\nb: *x\n", "p.yaml:1:4: anchors and aliases (&, *) are not allowed"),
        ("name: p\nwhen: " + "[" * 40 + "]" * 40 + "\n", "p.yaml:"),
    ],
)
def test_each_problem_is_located(text: str, expected: str) -> None:
    assert _problem(text).startswith(expected)


def test_deep_nesting_is_refused_before_it_can_hurt() -> None:
    deep = "name: p\nwhen: kv_usage > 0.9\nx: " + "{a: " * 40 + "1" + "}" * 40 + "\n"
    assert "nested more than 32 levels deep" in _problem(deep)


def test_a_huge_file_is_refused_without_being_read(tmp_path: Path) -> None:
    huge = tmp_path / "huge.yaml"
    huge.write_text(GOOD + "# " + "x" * (10 * 1024 * 1024) + "\n")
    with pytest.raises(ConfigError, match="policy files are limited to"):
        load_policy(huge)


def test_a_broken_file_is_left_out_and_the_others_load(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(GOOD)
    (tmp_path / "b.yaml").write_text("name: broken\nwhen: nope\n")
    (tmp_path / "c.yaml").write_text(GOOD.replace("good", "other"))
    (tmp_path / "d.yaml").write_text(GOOD)  # same name as a.yaml
    loaded = load_policies([tmp_path])
    assert [spec.name for spec in loaded.specs] == ["good", "other"]
    assert loaded.broken_files == (tmp_path / "b.yaml", tmp_path / "d.yaml")
    assert "already used by" in loaded.issues[-1].message


def test_a_symlink_leaving_the_directory_is_refused_unread(tmp_path: Path) -> None:
    outside = tmp_path / "secret.conf"
    outside.write_text("for: s3cr3t-value\n")
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "real.yaml").write_text(GOOD)
    (policies / "inside.yaml").symlink_to(policies / "real.yaml")
    (policies / "leak.yaml").symlink_to(outside)
    (policies / "dangling.yaml").symlink_to(tmp_path / "gone")
    (policies / "dir.yaml").mkdir()
    loaded = load_policies([policies])
    assert [spec.name for spec in loaded.specs] == ["good"]  # inside.yaml: a link inside, read
    assert loaded.broken_files == (
        policies / "dangling.yaml",
        policies / "dir.yaml",
        policies / "leak.yaml",
        policies / "real.yaml",  # the name 'good' again, after inside.yaml
    )
    rendered = "\n".join(issue.render() for issue in loaded.issues)
    assert "leak.yaml:0:0: a symlink to a file outside the policy directory" in rendered
    assert "dir.yaml:0:0: not a regular file" in rendered
    assert "dangling.yaml:0:0: cannot read it" in rendered
    assert "s3cr3t" not in rendered
    assert str(outside) not in rendered


def test_division_by_zero_at_run_time_blocks_the_action_not_the_daemon() -> None:
    spec = parse_policy(
        "name: p\nwhen: kv_usage > 0.9\naction:\n  set: {max_num_seqs: 'current / (kv_usage - kv_usage)'}\n",
        Path("p.yaml"),
    )
    view = TargetView("main", {"kv_usage": 0.95}, {"max_num_seqs": 256})
    _, decisions = evaluate(spec, PolicyState(), view, 0.0, datetime(2026, 1, 1, tzinfo=UTC))
    blocked = [d for d in decisions if d.kind is DecisionKind.BLOCKED]
    assert [d.guard for d in blocked] == ["expression_error"]


ADMISSION = (
    "name: gate\nwhen: kv_usage >= 0.0\n"
    "action: {admission: {controller: slo-band, every: 2s, min_cap: 4, params: {low_water: 0.5}}}\n"
)


def test_an_admission_action_loads_with_its_controller_and_interval() -> None:
    spec = parse_policy(ADMISSION, Path("p.yaml"))
    assert spec.action is not None
    admission = spec.action.admission
    assert admission is not None
    assert (admission.controller, admission.interval_s, admission.min_cap) == ("slo-band", 2.0, 4)
    assert admission.params == {"low_water": 0.5}
    assert spec.action.risk == "auto"


@pytest.mark.parametrize(
    ("admission", "expected"),
    [
        (
            "{controller: pid}",
            r"p.yaml:3:\d+: action.admission.controller: unknown admission controller 'pid'",
        ),
        (
            "{controller: aimd, params: {gain: 2}}",
            r"p.yaml:3:\d+: action.admission.controller: aimd: .*gain",
        ),
        (
            "{controller: aimd, every: 0s}",
            r"p.yaml:3:\d+: action.admission.every: the controller's interval must be above zero",
        ),
        (
            "{controller: aimd, min_cap: 0}",
            r"p.yaml:3:\d+: action.admission.min_cap: must be at least 1",
        ),
    ],
)
def test_a_bad_admission_action_is_located(admission: str, expected: str) -> None:
    problem = _problem(f"name: p\nwhen: kv_usage > 0.9\naction: {{admission: {admission}}}\n")
    assert re.match(expected, problem), problem


def test_an_admission_loop_never_steers_on_missing_data() -> None:
    # It acts while its policy fires, and assume_bad fires a policy on missing data.
    problem = _problem(
        "name: p\nwhen: kv_usage > 0.9\non_no_data: assume_bad\n"
        "action: {admission: {controller: aimd}}\n"
    )
    assert problem.startswith("p.yaml:3:1: on_no_data: an admission loop steers the gate"), problem
    for allowed in ("hold", "assume_ok"):
        text = f"name: p\nwhen: kv_usage > 0.9\non_no_data: {allowed}\n"
        parse_policy(text + "action: {admission: {controller: aimd}}\n", Path("p.yaml"))


def test_an_admission_policy_fires_but_never_asks_the_planner_for_a_change() -> None:
    spec = parse_policy(ADMISSION, Path("p.yaml"))
    view = TargetView("main", {"kv_usage": 0.5}, {"max_num_seqs": 256.0})
    state, decisions = evaluate(spec, PolicyState(), view, 0.0, datetime(2026, 1, 5, tzinfo=UTC))
    assert [d.kind for d in decisions] == [DecisionKind.FIRED]
    state, decisions = evaluate(spec, state, view, 60.0, datetime(2026, 1, 5, tzinfo=UTC))
    assert decisions == []


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_policy(text, Path("p.yaml"), targets=frozenset({"main"}))
    return [issue.render() for issue in caught.value.issues]


def test_a_shape_problem_does_not_hide_the_expressions_targets_and_knobs() -> None:
    problems = _problems(
        "targets: [mian]\nwhen: kv_usag > 0.9\naction: {set: {max_num_seq: current}}\n"
    )
    assert [problem.split(": ")[1] for problem in problems] == [
        "name",
        "targets.0",
        "when",
        "action.set.max_num_seq",
    ]
    assert problems[0] == "p.yaml:1:1: name: required key is missing"
    assert "unknown target 'mian' (did you mean 'main'?" in problems[1]
    assert "unknown knob 'max_num_seq' (did you mean 'max_num_seqs'?" in problems[3]


def test_setting_a_refused_key_aside_reports_no_consequence_of_it() -> None:
    # With `set` refused, the action does nothing: that is not a problem of the file.
    assert _problems("name: p\nwhen: kv_usage > 0.9\naction: {set: 3}\n") == [
        "p.yaml:3:10: action.set: expected a mapping of keys to values (got 3)"
    ]


def test_a_refused_item_sets_its_list_aside_and_the_rest_is_still_checked() -> None:
    problems = _problems(
        "name: p\nwhen: kv_usag > 0.9\n"
        "schedule: {windows: [{cron: '0 * * * *', duration: 1h}, {cron: '0 * * * *'}]}\n"
    )
    assert [problem.split(": ")[1] for problem in problems] == [
        "when",
        "schedule.windows.1.duration",
    ]
    assert problems[1].endswith("required key is missing")
