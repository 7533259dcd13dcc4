"""explain's answer, pure: what the next evaluation decides, and when a policy will move on."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from daemon.policy.evaluate import TargetView
from daemon.policy.explanations import explain_policy
from daemon.policy.loading import parse_policy
from daemon.policy.state import Phase, PolicyState

WALL = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
POLICY = """
name: busy
targets: [main]
when: kv_usage > 0.5
for: 2m
clear: kv_usage < 0.2
keep_firing_for: 1m
action:
  set: {max_num_seqs: "current - 32.0"}
"""
SPEC = parse_policy(POLICY, Path("busy.yaml"))
FULL = {"main": TargetView("main", {"kv_usage": 0.8}, {"max_num_seqs": 256.0})}
EMPTY = {"main": TargetView("main", {"kv_usage": 0.1}, {"max_num_seqs": 256.0})}


def test_a_pending_policy_says_when_it_will_fire_if_the_condition_keeps_holding() -> None:
    states = {("busy", "main"): PolicyState(Phase.PENDING, since=1000.0)}
    answer = explain_policy(SPEC, states, FULL, 1020.0, WALL)
    main = answer["targets"]["main"]
    assert (main["phase"], main["next_phase"], main["held_for_s"]) == ("pending", "pending", 20.0)
    assert main["fires_in_s"] == 100.0  # 2m - 20 s: "will act in 1m40s"
    assert main["resolves_in_s"] is None
    assert answer["acts"] is True


def test_from_a_fresh_state_the_whole_for_is_ahead() -> None:
    main = explain_policy(SPEC, {}, FULL, 50.0, WALL)["targets"]["main"]
    assert (main["phase"], main["next_phase"], main["fires_in_s"]) == ("inactive", "pending", 120.0)


def test_a_firing_policy_whose_exit_condition_holds_says_when_it_will_resolve() -> None:
    firing = PolicyState(Phase.FIRING, since=0.0, clearing_since=500.0, last_action_at=0.0)
    main = explain_policy(SPEC, {("busy", "main"): firing}, EMPTY, 530.0, WALL)["targets"]["main"]
    assert (main["next_phase"], main["fires_in_s"], main["resolves_in_s"]) == ("firing", None, 30.0)


def test_nothing_ahead_when_the_condition_does_not_hold() -> None:
    main = explain_policy(SPEC, {}, EMPTY, 50.0, WALL)["targets"]["main"]
    assert (main["next_phase"], main["fires_in_s"], main["resolves_in_s"]) == (
        "inactive",
        None,
        None,
    )


def test_a_shadow_policy_only_records() -> None:
    shadow = parse_policy(POLICY + "mode: shadow\n", Path("busy.yaml"))
    assert explain_policy(shadow, {}, FULL, 0.0, WALL)["acts"] is False
