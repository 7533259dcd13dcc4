"""The ``tune`` action: validated with located errors, and paced like a change (issue 16).

When due, a tune policy records one ``tune`` decision carrying its question and the tuned
knobs' values in force (the engine runs the what-if); it then cools down like any action.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.core.errors import ConfigError
from daemon.policy.decisions import DecisionKind
from daemon.policy.evaluate import TargetView, evaluate
from daemon.policy.loading import parse_policy
from daemon.policy.spec import PolicySpec
from daemon.policy.state import PolicyState

WALL = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
KNOBS = {"max_num_seqs": 1024.0, "max_num_batched_tokens": 8192.0}
HOT = TargetView("main", {"tpot_p95_s": 0.15}, KNOBS)


def _policy(action: str, extra: str = "") -> PolicySpec:
    text = f"name: tpot-tune\nwhen: tpot_p95_s > 0.05\ncooldown: 30m\n{extra}action:\n{action}"
    return parse_policy(text, Path("tpot-tune.yaml"))


def _problems(action: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        _policy(action)
    return [issue.render() for issue in caught.value.issues]


def test_a_tune_action_loads_with_its_defaults_and_needs_approval() -> None:
    spec = _policy("  tune: {objective: slo_attainment, min_gain: 5%, window: 15m}\n")

    assert spec.action is not None
    tune = spec.action.tune
    assert tune is not None
    assert tune.knobs == ("max_num_seqs", "max_num_batched_tokens")
    assert tune.objective == "slo_attainment"
    assert tune.min_gain == pytest.approx(0.05)
    assert tune.window_s == 900.0
    assert (tune.ttft_slo_s, tune.tpot_slo_s) == (2.0, 0.1)
    assert spec.action.risk == "approval"  # a tuned change restarts vLLM
    assert _policy("  tune: {min_gain: 0.2}\n  risk: auto\n").action.risk == "auto"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (
            "  tune: {knobs: [max_num_seq]}\n",
            "tpot-tune.yaml:5:18: action.tune.knobs.0: unknown knob 'max_num_seq' "
            "(did you mean 'max_num_seqs'? tunable: max_num_batched_tokens, max_num_seqs)",
        ),
        (
            "  tune: {knobs: [watermark]}\n",
            "tpot-tune.yaml:5:18: action.tune.knobs.0: watermark cannot be tuned: a what-if "
            "varies max_num_seqs and max_num_batched_tokens only (move the others with `set`)",
        ),
        (
            "  tune: {min_gain: 150%}\n",
            "tpot-tune.yaml:5:10: action.tune.min_gain: '150%' is not a share between 0% and "
            "100% (write 10% or 0.1)",
        ),
        (
            "  tune: {min_gain: 10}\n",
            "tpot-tune.yaml:5:10: action.tune.min_gain: 10 is not a share between 0% and 100% "
            "(write 10% or 0.1)",
        ),
        (
            "  tune: {objective: latency}\n",
            "tpot-tune.yaml:5:10: action.tune.objective: expected 'goodput' or "
            "'slo_attainment' (got 'latency')",
        ),
        (
            "  tune: {profile: no-such-gpu}\n",
            "tpot-tune.yaml:5:10: action.tune.profile: the engine profile 'no-such-gpu' does "
            "not load: no such profile file, and no shipped profile of that name",
        ),
        (
            "  tune: {}\n  set: {max_num_seqs: 64}\n",
            "tpot-tune.yaml:4:1: action: an action does exactly one thing",
        ),
    ],
)
def test_a_wrong_tune_action_is_reported_at_its_key(action: str, expected: str) -> None:
    problems = _problems(action)

    assert any(problem.startswith(expected) for problem in problems), problems


def test_a_due_tune_policy_records_one_tune_decision_then_cools_down() -> None:
    spec = _policy("  tune: {knobs: [max_num_batched_tokens], min_gain: 10%}\n")

    state, decisions = evaluate(spec, PolicyState(), HOT, 0.0, WALL)

    assert [d.kind for d in decisions] == [DecisionKind.FIRED, DecisionKind.TUNE]
    tune = decisions[1]
    assert tune.intent is not None
    assert tune.intent.changes == {}  # the what-if says where to; the evaluator cannot
    assert tune.intent.current == {"max_num_batched_tokens": 8192.0}
    assert tune.intent.risk == "approval"
    assert tune.details["tune"]["knobs"] == ["max_num_batched_tokens"]
    assert tune.details["tune"]["min_gain"] == pytest.approx(0.1)
    assert tune.details["tune"]["tpot_slo_s"] == pytest.approx(0.1)
    assert tune.evidence.signals == {"tpot_p95_s": 0.15}
    # Paced like a change: the round started the cooldown.
    assert state.last_action_at == 0.0
    later, again = evaluate(spec, state, HOT, 60.0, WALL)
    assert again == []
    _, after_cooldown = evaluate(spec, later, HOT, 1801.0, WALL)
    assert [d.kind for d in after_cooldown] == [DecisionKind.TUNE]


def test_a_tune_policy_without_the_knobs_in_force_does_not_ask() -> None:
    spec = _policy("  tune: {}\n")
    unknown = TargetView("main", {"tpot_p95_s": 0.15}, {"max_num_seqs": 256.0})

    _, decisions = evaluate(spec, PolicyState(), unknown, 0.0, WALL)

    assert [d.kind for d in decisions] == [DecisionKind.FIRED, DecisionKind.BLOCKED]
    assert decisions[1].guard == "unknown_current_value"


def test_a_tune_policy_in_shadow_records_shadow_with_its_question() -> None:
    spec = _policy("  tune: {}\n", extra="mode: shadow\n")

    _, decisions = evaluate(spec, PolicyState(), HOT, 0.0, WALL)

    assert [d.kind for d in decisions] == [DecisionKind.FIRED, DecisionKind.SHADOW]
    assert decisions[1].details["tune"]["objective"] == "goodput"
