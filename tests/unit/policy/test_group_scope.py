"""`scope: group` and its `canary`: a group change loads with its rule, or is refused, located."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.core.errors import ConfigError
from daemon.fleet.canary_analysis import CanaryRule
from daemon.policy.loading import parse_policy

HEAD = "name: p\nwhen: kv_usage > 0.9\n"
SET = "action: {set: {max_num_seqs: 'current * 0.75'}}\n"


def test_a_group_change_loads_with_its_canary_rule() -> None:
    text = (
        HEAD
        + SET
        + "scope: group\ncanary: {window: 90s, max_attainment_drop: 3%, max_goodput_drop: 0.2,"
        " max_error_rate_rise: 2%, min_requests: 50, ttft_slo: 500ms}\n"
    )
    spec = parse_policy(text, Path("p.yaml"))
    assert spec.group_scoped
    assert spec.canary == CanaryRule(90.0, 0.03, 0.2, 0.02, 50, 0.5)
    assert spec.action is not None
    assert spec.action.risk == "approval"  # max_num_seqs restarts the server


def test_a_group_change_without_a_canary_gets_the_default_rule() -> None:
    spec = parse_policy(HEAD + SET + "scope: group\n", Path("p.yaml"))
    assert spec.canary == CanaryRule()


def test_an_instance_policy_is_no_group_change() -> None:
    spec = parse_policy(HEAD + SET, Path("p.yaml"))
    assert not spec.group_scoped
    assert spec.canary is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            HEAD + "action: {operation: restart}\nscope: group\n",
            "p.yaml:4:1: scope: a group change rolls knob values out, canary first",
        ),
        (
            HEAD + "scope: group\n",
            "p.yaml:3:1: scope: a group change rolls knob values out, canary first",
        ),
        (
            HEAD + "action: {set: {max_num_seqs: 64}, risk: auto}\nscope: group\n",
            "p.yaml:3:35: action.risk: a group change starts with one approval for the group",
        ),
        (
            HEAD + SET + "canary: {window: 5m}\n",
            "p.yaml:4:1: canary: a canary judges a group change: add `scope: group`",
        ),
        (
            HEAD + SET + "scope: fleet\n",
            "p.yaml:4:1: scope: expected 'instance' or 'group' (got 'fleet')",
        ),
        (
            HEAD + SET + "scope: group\ncanary: {max_goodput_drop: 150%}\n",
            "p.yaml:5:10: canary.max_goodput_drop: '150%' is not a share",
        ),
        (
            HEAD + SET + "scope: group\ncanary: {window: 0s}\n",
            "p.yaml:5:10: canary.window: must be above zero",
        ),
    ],
)
def test_a_group_change_that_cannot_roll_out_is_refused_where_it_is_written(
    text: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_policy(text, Path("p.yaml"))
    assert caught.value.issues[0].render().startswith(expected)
