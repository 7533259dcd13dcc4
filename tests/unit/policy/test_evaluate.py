"""The semantics of evaluation, table-driven on a fake clock: no loop, no sleeping."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.policy.decisions import DecisionKind
from daemon.policy.evaluate import TargetView, evaluate
from daemon.policy.loading import parse_policy
from daemon.policy.spec import PolicySpec
from daemon.policy.state import Phase, PolicyState

MONDAY = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KV_THRASH = """
name: kv-thrash
when: preemptions_per_s > 0.5 && ttft_p95_s > 2.0
for: 2m
clear: preemptions_per_s < 0.05
keep_firing_for: 1m
action:
  set: {max_num_seqs: "math.greatest(current * 0.75, 32.0)"}
cooldown: 10m
budget_per_hour: 2
"""
BAD = {"preemptions_per_s": 2.0, "ttft_p95_s": 5.0}
BAND = {"preemptions_per_s": 0.2, "ttft_p95_s": 5.0}  # not bad enough to fire, not clear
GOOD = {"preemptions_per_s": 0.0, "ttft_p95_s": 0.5}


def policy(text: str = KV_THRASH, **overrides: Any) -> PolicySpec:
    lines = [line for line in text.splitlines() if line.split(":")[0] not in overrides]
    lines += [f"{key}: {value}" for key, value in overrides.items()]
    return parse_policy("\n".join(lines), Path("test.yaml"))


def run(
    spec: PolicySpec,
    timeline: Iterable[tuple[float, Mapping[str, Any] | None]],
    knobs: Mapping[str, float] | None = None,
    state: PolicyState | None = None,
    accept: bool = True,
) -> tuple[PolicyState, list[tuple[float, str, str | None]]]:
    """Evaluate at each (time, signals); intents are accepted as the planner would."""
    state = state or PolicyState()
    seen = []
    for at, signals in timeline:
        view = TargetView(
            "main", signals or {}, knobs if knobs is not None else {"max_num_seqs": 256}
        )
        state, decisions = evaluate(spec, state, view, at, MONDAY + timedelta(seconds=at))
        for decision in decisions:
            seen.append((at, decision.kind.value, decision.guard))
            if decision.kind is DecisionKind.INTENT and accept:
                state = state.acted(at)
    return state, seen


def every(
    step: float, start: float, end: float, signals: Mapping[str, Any] | None
) -> list[tuple[float, Mapping[str, Any] | None]]:
    count = int((end - start) / step) + 1
    return [(start + i * step, signals) for i in range(count)]


def test_for_holds_before_firing_and_a_gap_resets_it() -> None:
    timeline = [*every(10, 0, 100, BAD), (110, GOOD), *every(10, 120, 250, BAD)]
    state, seen = run(policy(), timeline)
    assert seen == [(240, "fired", None), (240, "intent", None)]
    assert state.phase is Phase.FIRING


def test_edge_triggered_one_action_per_cooldown_while_it_keeps_firing() -> None:
    _, seen = run(policy(budget_per_hour=4), every(10, 0, 1500, BAD))
    intents = [at for at, kind, _ in seen if kind == "intent"]
    assert intents == [120, 720, 1320]  # fired at 120 s, then once per 10 min cooldown


def test_hysteresis_keeps_firing_in_the_band_and_clears_after_keep_firing_for() -> None:
    timeline = [*every(10, 0, 120, BAD), *every(10, 130, 400, BAND), *every(10, 410, 500, GOOD)]
    state, seen = run(policy(), timeline)
    kinds = [(at, kind) for at, kind, _ in seen]
    assert kinds == [(120, "fired"), (120, "intent"), (470, "resolved")]  # 410 + 60 s
    assert state.phase is Phase.INACTIVE


def test_a_resolve_says_how_long_the_exit_condition_held_and_how_long_it_fired() -> None:
    # Fires at 120 s; clear from 410 s; resolved at 470 s, after keep_firing_for (1m).
    timeline = [*every(10, 0, 120, BAD), *every(10, 130, 400, BAND), *every(10, 410, 500, GOOD)]
    spec, state = policy(), PolicyState()
    resolved = []
    for at, signals in timeline:
        view = TargetView("main", signals or {}, {"max_num_seqs": 256})
        state, decisions = evaluate(spec, state, view, at, MONDAY + timedelta(seconds=at))
        resolved += [d for d in decisions if d.kind is DecisionKind.RESOLVED]
    [decision] = resolved
    assert decision.evidence.condition == "preemptions_per_s < 0.05"
    assert decision.evidence.held_for_s == 60.0  # the exit condition, 410 s -> 470 s
    assert decision.details == {"firing_for_s": 350.0}  # the policy, 120 s -> 470 s


def test_without_clear_the_negated_condition_exits() -> None:
    spec = policy(KV_THRASH.replace("clear: preemptions_per_s < 0.05\n", ""))
    _, seen = run(spec, [*every(10, 0, 120, BAD), *every(10, 130, 200, BAND)])
    assert (190, "resolved", None) in seen


@pytest.mark.parametrize(
    ("on_no_data", "fires_at"),
    [
        ("hold", 170),  # pending since 0 s; the 50 s unseen (60 s -> 110 s) do not count
        ("assume_ok", 230),  # the gap reads as "fine": pending again from 110 s
        ("assume_bad", 120),  # the gap reads as "bad": pending since 0 s
    ],
)
def test_no_data_follows_on_no_data(on_no_data: str, fires_at: float) -> None:
    timeline = [*every(10, 0, 50, BAD), *every(10, 60, 100, None), *every(10, 110, 250, BAD)]
    _, seen = run(policy(on_no_data=on_no_data), timeline)
    assert seen[0] == (fires_at, "fired", None)


def test_a_gap_as_long_as_for_starts_the_pending_timer_over() -> None:
    # Seen holding 0 -> 100 s, then 130 s without data: nobody knows it held meanwhile.
    timeline = [*every(10, 0, 100, BAD), *every(10, 110, 230, None), *every(10, 240, 400, BAD)]
    _, seen = run(policy(), timeline)
    assert seen[0] == (360, "fired", None)  # a whole `for` (2m) seen again, from 240 s


def test_time_without_data_does_not_count_toward_keep_firing_for() -> None:
    # Fires at 120 s; clear holds from 130 s; 40 s of no data at 150 s -> 190 s; keep_firing_for
    # (1m) is reached at 130 + 60 + 40 = 230 s, not at 190 s just as data comes back.
    timeline = [*every(10, 0, 120, BAD), *every(10, 130, 140, GOOD), *every(10, 150, 180, None),
                *every(10, 190, 300, GOOD)]  # fmt: skip
    _, seen = run(policy(), timeline)
    assert [(at, kind) for at, kind, _ in seen if kind == "resolved"] == [(230, "resolved")]


def test_a_condition_that_fails_to_evaluate_is_not_seen_holding() -> None:
    spec = policy(when="int(waiting) / int(running) > 1", clear="waiting < 1.0", **{"for": "1m"})
    failing = {"waiting": 5.0, "running": 0.0}  # an integer division by zero
    bad = {"waiting": 5.0, "running": 1.0}
    timeline = [*every(10, 0, 30, bad), *every(10, 40, 70, failing), *every(10, 80, 200, bad)]
    _, seen = run(spec, timeline)
    assert [(at, kind) for at, kind, _ in seen] == [(40, "error"), (100, "fired"), (100, "intent")]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["bad", "gone", "good"]), min_size=1, max_size=60))
def test_hold_fires_only_after_for_seen_holding(ticks: list[str]) -> None:
    spec = policy()  # for: 2m, on_no_data: hold
    signals = {"bad": BAD, "gone": None, "good": GOOD}
    timeline = [(10.0 * i, signals[tick]) for i, tick in enumerate(ticks)]
    _, seen = run(spec, timeline)
    fired = [at for at, kind, _ in seen if kind == "fired"]
    if not fired:
        return
    # Walk back from the firing tick: the time seen holding is each step that began on a tick
    # seen bad; an unseen stretch at least `for` long, or a good tick, ends the episode.
    at = int(fired[0] // 10)
    seen_s, unseen_s = 0.0, 0.0
    for i in range(at - 1, -1, -1):
        if ticks[i] == "good":
            break
        if ticks[i] == "gone":
            unseen_s += 10.0
            continue
        if unseen_s >= spec.for_s:
            break
        unseen_s = 0.0
        seen_s += 10.0
    assert seen_s >= spec.for_s, (ticks, fired[0], seen_s)


def test_assume_bad_fires_on_missing_data_but_only_alerts() -> None:
    spec = policy(on_no_data="assume_bad", **{"for": "0s"})
    state, seen = run(spec, every(10, 0, 60, None))
    assert seen == [(0, "fired", None), (0, "alert", None)]
    assert state.last_action_at is None, "never an action on missing data"


def test_stale_signal_is_never_acted_on_even_after_firing() -> None:
    # Fired on good data; the action's expression reads a signal that then goes missing.
    spec = policy(KV_THRASH.replace('"math.greatest(current * 0.75, 32.0)"', '"current - running"'))
    _, seen = run(spec, every(10, 0, 130, BAD))
    assert seen == [(120, "fired", None), (120, "blocked", "no_data")]


def test_budget_and_cooldown_guards_are_recorded_once() -> None:
    spec = policy(cooldown="1m", budget_per_hour=2)
    _, seen = run(spec, every(10, 0, 600, BAD))
    assert [(at, kind, guard) for at, kind, guard in seen] == [
        (120, "fired", None),
        (120, "intent", None),
        (180, "intent", None),
        (240, "blocked", "budget"),
    ]


def test_unknown_current_value_blocks() -> None:
    _, seen = run(policy(), every(10, 0, 200, BAD), knobs={})
    assert seen == [(120, "fired", None), (120, "blocked", "unknown_current_value")]


def test_shadow_mode_decides_and_records_but_never_intends() -> None:
    state, seen = run(policy(mode="shadow"), every(10, 0, 800, BAD))
    assert [kind for _, kind, _ in seen] == ["fired", "shadow", "shadow"]
    assert state.last_action_at == 720


def test_schedule_windows_gate_actions() -> None:
    text = KV_THRASH + 'schedule:\n  windows: [{cron: "0 14 * * mon", duration: 1h}]\n'
    _, seen = run(policy(text), every(60, 0, 7800, BAD))
    # Firing at 120 s (12:02) is outside the window; the first action is at 14:00 (7200 s).
    assert seen[:3] == [(120, "fired", None), (120, "blocked", "schedule"), (7200, "intent", None)]


def test_intent_carries_current_desired_value_and_evidence() -> None:
    spec = policy()
    state = PolicyState()
    for at in range(0, 130, 10):
        state, decisions = evaluate(
            spec, state, TargetView("main", BAD, {"max_num_seqs": 256}), at, MONDAY
        )
    intent = next(d for d in decisions if d.kind is DecisionKind.INTENT)
    assert intent.intent is not None
    assert intent.intent.changes == {"max_num_seqs": 192.0}
    assert intent.intent.current == {"max_num_seqs": 256.0}
    assert intent.intent.risk == "approval"  # max_num_seqs needs a restart
    assert intent.evidence.signals == {"preemptions_per_s": 2.0, "ttft_p95_s": 5.0}
    # Bad since t=0; it fires and acts at t=120 s: the evidence says so, not "held for 0 s".
    assert intent.evidence.held_for_s == 120.0


def test_fresh_data_alone_can_settle_an_or() -> None:
    spec = policy("name: p\nwhen: kv_usage > 0.9 || waiting > 10.0\nfor: 0s\n")
    _, seen = run(spec, [(0, {"kv_usage": 0.95})])  # waiting has no data, and does not matter
    assert seen == [(0, "fired", None)]
    _, seen = run(spec, [(0, {"kv_usage": 0.5})])  # now it would matter: no data, hold
    assert seen == []


def test_scheduled_changes_act_once_at_each_moment() -> None:
    text = (
        'name: morning\nwhen: "true"\ncooldown: 1m\nbudget_per_hour: 10\n'
        "action:\n  set: {max_num_seqs: 'current + 64.0'}\n  risk: auto\n"
        "schedule:\n  at: [{cron: '0 13 * * mon'}, {cron: '30 13 * * mon'}]\n"
    )
    # MONDAY is 12:00; 13:00 is at 3600 s, 13:30 at 5400 s.
    _, seen = run(policy(text), every(60, 0, 7200, {}))
    assert [(at, kind) for at, kind, _ in seen] == [
        (0, "fired"),
        (3600, "intent"),
        (5400, "intent"),
    ]


def test_a_scheduled_change_missed_by_more_than_the_grace_is_skipped() -> None:
    text = (
        'name: morning\nwhen: "true"\naction:\n  set: {max_num_seqs: "64.0"}\n  risk: auto\n'
        "schedule:\n  at: [{cron: '0 12 * * mon'}]\n"
    )
    # The governor first looks at 12:15, past the 10-minute grace: nothing is done late.
    _, seen = run(policy(text), every(60, 900, 1200, {}))
    assert seen == [(900, "fired", None)]
