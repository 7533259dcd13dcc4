"""Envelopes, dwell, budgets and conflicts: table-driven, then properties with hypothesis."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.core.settings import Envelope
from daemon.policy.decisions import Decision, DecisionKind, Evidence, Intent
from daemon.policy.evaluate import TargetView
from daemon.policy.loading import parse_policy
from daemon.policy.planner import KnobHistory, plan
from daemon.policy.state import PolicyState
from daemon.policy.tick import StateKey, tick

SEQS = Envelope(min=32, max=512, max_step=64, min_dwell_s=600, hourly_budget=2)
ENVELOPES = {("main", "max_num_seqs"): SEQS}


def intent(
    policy: str, wanted: float, current: float = 256, knob: str = "max_num_seqs"
) -> Decision:
    return Decision(
        policy,
        "main",
        0.0,
        DecisionKind.INTENT,
        Evidence("x", {}),
        Intent({knob: wanted}, {knob: current}, None, "auto"),
    )


@pytest.mark.parametrize(
    ("wanted", "current", "expected"),
    [
        (192, 256, 192),  # inside everything
        (10, 256, 192),  # one step of 64 at most
        (10, 40, 32),  # clamped to min
        (4096, 480, 512),  # clamped to max
        (200.7, 256, 201),  # integers round towards the current value
        (300.2, 256, 300),
    ],
)
def test_values_are_bounded_by_the_envelope(wanted: float, current: float, expected: float) -> None:
    result = plan([intent("p", wanted, current)], ENVELOPES, {}, now=0)
    assert [d.intent.changes for d in result.accepted if d.intent] == [{"max_num_seqs": expected}]


@pytest.mark.parametrize(
    ("decision", "history", "now", "guard"),
    [
        (intent("p", 32, 32), {}, 0, "no_change"),
        (intent("p", 100), {("main", "max_num_seqs"): KnobHistory(100.0, (100.0,))}, 500, "dwell"),
        (
            intent("p", 100),
            {("main", "max_num_seqs"): KnobHistory(0.0, (0.0, 1.0))},
            1200,
            "knob_budget",
        ),
        (intent("p", 0.5, 0.1, knob="watermark"), {}, 0, "no_envelope"),
    ],
)
def test_guards(
    decision: Decision, history: dict[Any, KnobHistory], now: float, guard: str
) -> None:
    result = plan([decision], ENVELOPES, history, now)
    assert [d.guard for d in result.blocked] == [guard]
    assert result.accepted == ()


def test_the_safer_direction_wins_a_conflict() -> None:
    up, down = intent("headroom", 320), intent("kv-thrash", 192)
    result = plan([up, down], ENVELOPES, {}, now=0)
    assert [d.policy for d in result.accepted] == ["kv-thrash"]
    assert [(d.policy, d.guard) for d in result.blocked] == [("headroom", "conflict")]


def test_for_quieter_logs_higher_is_safer() -> None:
    envelopes = {("main", "log_level"): Envelope(min=10, max=40, max_step=30)}
    verbose, quiet = intent("debug", 10, 20, "log_level"), intent("disk", 30, 20, "log_level")
    result = plan([verbose, quiet], envelopes, {}, now=0)
    assert [d.policy for d in result.accepted] == ["disk"]


# -- properties over random signal series -----------------------------------------------------

POLICIES = [
    parse_policy(text, Path(f"p{i}.yaml"))
    for i, text in enumerate(
        [
            "name: down\nwhen: kv_usage > 0.9\nfor: 20s\ncooldown: 30s\n"
            "action:\n  set: {max_num_seqs: 'current * 0.5'}\n  risk: auto\n",
            "name: up\nwhen: kv_usage < 0.3\nfor: 10s\ncooldown: 20s\n"
            "action:\n  set: {max_num_seqs: 'current * 2.0'}\n  risk: auto\n",
            "name: jump\nwhen: waiting > 50.0\nfor: 0s\ncooldown: 0s\nbudget_per_hour: 60\n"
            "action:\n  set: {max_num_seqs: 'current + waiting * 10.0'}\n  risk: auto\n",
        ]
    )
]
START = datetime(2026, 11, 30, tzinfo=UTC)
# None stands for a stale or missing signal.
readings = st.one_of(st.none(), st.floats(0, 1)), st.one_of(st.none(), st.floats(0, 500))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(*readings), min_size=1, max_size=120), st.integers(5, 30))
def test_random_series_never_break_the_envelope_the_dwell_or_freshness(
    series: list[tuple[float | None, float | None]], step_s: int
) -> None:
    knob = 256.0
    history: dict[Any, KnobHistory] = {}
    states: dict[StateKey, PolicyState] = {}
    applied: list[float] = []
    for index, (kv, waiting) in enumerate(series):
        now = float(index * step_s)
        fresh = {
            name: value
            for name, value in (("kv_usage", kv), ("waiting", waiting))
            if value is not None
        }
        view = TargetView("main", fresh, {"max_num_seqs": knob})
        result = tick(
            POLICIES,
            states,
            {"main": view},
            envelopes=ENVELOPES,
            history=history,
            now=now,
            wall=START + timedelta(seconds=now),
        )
        states = result.states
        assert len(result.accepted) <= 1, "one change per knob per tick"
        for decision in result.accepted:
            assert decision.intent is not None
            new = decision.intent.changes["max_num_seqs"]
            # Never outside the envelope, never a step larger than max_step.
            assert SEQS.min <= new <= SEQS.max
            assert abs(new - knob) <= SEQS.max_step
            # Never on stale data: every signal the decision read was fresh now.
            assert all(name in fresh for name in decision.evidence.signals)
            # Never two changes inside the dwell time.
            assert not applied or now - applied[-1] >= SEQS.min_dwell_s
            applied.append(now)
            knob = new
            history[("main", "max_num_seqs")] = history.get(
                ("main", "max_num_seqs"), KnobHistory()
            ).changed(now)


def test_a_firing_veto_blocks_unsafe_moves_only() -> None:
    veto = parse_policy(
        "name: hot\nwhen: gpu_temperature_celsius['0'] > 85.0\naction: {veto: [max_num_seqs]}\n",
        Path("hot.yaml"),
    )
    raise_ = parse_policy(
        "name: up\nwhen: kv_usage < 0.3\naction:\n  set: {max_num_seqs: 'current * 2.0'}\n",
        Path("up.yaml"),
    )
    lower = parse_policy(
        "name: down\nwhen: kv_usage > 0.9\naction:\n  set: {max_num_seqs: 'current * 0.5'}\n",
        Path("down.yaml"),
    )
    hot = {"gpu_temperature_celsius": {"0": 90.0}}

    def guards(kv: float) -> list[tuple[str, str | None]]:
        view = TargetView("main", {**hot, "kv_usage": kv}, {"max_num_seqs": 256})
        result = tick(
            [veto, raise_, lower],
            {},
            {"main": view},
            envelopes=ENVELOPES,
            history={},
            now=0.0,
            wall=START,
        )
        return [
            (d.policy, d.guard) for d in result.decisions if d.kind.value in ("intent", "blocked")
        ]

    assert guards(0.1) == [("up", "veto")]
    assert guards(0.95) == [("down", None)]


def test_a_knob_already_in_place_drops_out_of_a_multi_knob_change() -> None:
    envelopes = {
        ("main", "log_level"): Envelope(min=10, max=40, max_step=30),
        ("main", "enable_log_requests"): Envelope(min=0, max=1, max_step=1),
    }
    decision = Decision(
        "disk",
        "main",
        0.0,
        DecisionKind.INTENT,
        Evidence("x", {}),
        Intent(
            {"log_level": 30.0, "enable_log_requests": 0.0},
            {"log_level": 20.0, "enable_log_requests": 0.0},
            None,
            "approval",
        ),
    )
    result = plan([decision], envelopes, {}, now=0)
    assert [d.intent.changes for d in result.accepted if d.intent] == [{"log_level": 30.0}]
