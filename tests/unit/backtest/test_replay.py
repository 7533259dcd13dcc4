"""The replay: recorded ticks through the real policy core, the gate and the knobs' histories."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from daemon.app.backtest.errors import BacktestError
from daemon.app.backtest.runner import Options, run_backtest
from daemon.app.backtest.timeline import Event
from daemon.engine.actuation.freeze_files import write_freeze
from tests.unit.backtest.worlds import START, busy, config, series, write_policy, write_recording

BUSY_THEN_CALM = series((30, {"running": 12.0}), (30, {"running": 2.0}))
KNOBS = {"max_num_seqs": 256.0}


def _events(options: Options) -> tuple[Event, ...]:
    outcome = run_backtest(options)
    assert outcome.a is not None
    return outcome.a.events


def _brief(events: tuple[Event, ...]) -> list[tuple[float, str, str | None, str | None]]:
    return [(event.at_s, event.kind, event.route, event.guard) for event in events]


def test_the_timeline_shows_fire_intent_dwell_and_resolve(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "rec.jsonl", BUSY_THEN_CALM, KNOBS)
    policies = write_policy(tmp_path / "a", "busy", busy())
    events = _events(Options(config(), (recording,), policies=policies))
    assert _brief(events) == [
        (10.0, "fired", None, None),
        (10.0, "intent", "auto", None),
        # The cooldown has passed, but the knob's history holds the would-have change: the
        # envelope's dwell (120 s) blocks the second halving, as in the daemon.
        (70.0, "blocked", None, "dwell"),
        (130.0, "intent", "auto", None),  # 120 s after the first: the dwell is over
        (150.0, "resolved", None, None),
    ]
    intent = events[1]
    assert intent.changes == {"max_num_seqs": 192.0}  # 256 * 0.5, at most max_step 64 down
    assert intent.current == {"max_num_seqs": 256.0}
    assert intent.signals == {"running": 12.0}
    assert intent.index == 2
    assert "dwell 120 s" in events[2].reason


def test_without_a_dwell_the_knob_budget_counts_would_have_changes(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "rec.jsonl", series((60, {"running": 12.0})), KNOBS)
    policies = write_policy(tmp_path / "a", "busy", busy())
    events = _events(Options(config(dwell_s=0, budget=2), (recording,), policies=policies))
    assert [(e.at_s, e.kind, e.guard) for e in events if e.kind != "fired"] == [
        (10.0, "intent", None),
        (70.0, "intent", None),
        (130.0, "blocked", "knob_budget"),
    ]


def test_a_freeze_refuses_the_would_have_change_as_the_daemon_would(tmp_path: Path) -> None:
    # A freeze of main set (as `vllm-governor freeze` does) until a minute into the recording.
    state_dir = tmp_path / "state"
    write_freeze(state_dir, "main", START + timedelta(seconds=60), "release window (by ops)")
    recording = write_recording(tmp_path / "rec.jsonl", BUSY_THEN_CALM, KNOBS)
    policies = write_policy(tmp_path / "a", "busy", busy())
    events = _events(Options(config(state_dir=state_dir), (recording,), policies=policies))
    assert _brief(events) == [
        (10.0, "fired", None, None),
        # The planner accepts it and the router sends it to the actuator, whose preflight
        # refuses it: frozen at the recorded time. Nothing was applied, so no dwell starts.
        (10.0, "intent", None, None),
        (10.0, "blocked", None, "frozen"),
        (70.0, "intent", "auto", None),  # after the cooldown; the freeze expired at +60 s
        (130.0, "blocked", None, "dwell"),  # that one was applied: its dwell counts from 70 s
        (150.0, "resolved", None, None),
    ]
    assert "release window (by ops)" in events[2].reason
    assert events[2].changes == {"max_num_seqs": 192.0}


def test_approval_intents_are_routed_to_approval(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "rec.jsonl", BUSY_THEN_CALM, KNOBS)
    policies = write_policy(tmp_path / "a", "busy", busy(risk="approval"))
    events = _events(Options(config(), (recording,), policies=policies))
    assert ("intent", "approval") in [(e.kind, e.route) for e in events]
    # A proposal is not a change: nothing enters the history, so no dwell blocks the next one.
    intents = [(e.at_s, e.route) for e in events if e.kind == "intent"]
    assert intents == [(10.0, "approval"), (70.0, "approval"), (130.0, "approval")]
    assert not [e for e in events if e.kind == "blocked"]


def test_the_gate_blocks_intents_for_a_server_it_cannot_change(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "rec.jsonl", BUSY_THEN_CALM, KNOBS)
    policies = write_policy(tmp_path / "a", "busy", busy())
    events = _events(Options(config(actuated=False), (recording,), policies=policies))
    assert _brief(events)[1:3] == [
        (10.0, "intent", None, None),
        (10.0, "blocked", None, "not_actuated"),
    ]


def test_unknown_knob_values_block_as_in_the_daemon(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "rec.jsonl", BUSY_THEN_CALM)  # no knobs recorded
    policies = write_policy(tmp_path / "a", "busy", busy())
    events = _events(Options(config(), (recording,), policies=policies))
    assert ("blocked", "unknown_current_value") in [(e.kind, e.guard) for e in events]


def test_the_clock_runs_forward_across_a_reboot(tmp_path: Path) -> None:
    first = write_recording(tmp_path / "one.jsonl", series((3, {"running": 12.0})), KNOBS)
    # After a reboot the monotonic clock starts again near zero; the wall clock goes on.
    second = tmp_path / "two.jsonl"
    text = first.read_text().replace('"monotonic":10', '"monotonic":1')
    text = text.replace("10:00:", "10:01:")
    second.write_text(text)
    policies = write_policy(tmp_path / "a", "busy", busy())
    outcome = run_backtest(Options(config(), (first, second), policies=policies))
    assert outcome.a is not None
    assert [e.at_s for e in outcome.a.events][:2] == [10.0, 10.0]
    assert all(e.at_s >= 0 for e in outcome.a.events)


def test_broken_policies_stop_the_backtest_and_say_where(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "rec.jsonl", BUSY_THEN_CALM, KNOBS)
    policies = write_policy(tmp_path / "a", "busy", busy().replace("running >", "runing >"))
    with pytest.raises(BacktestError, match=r"busy.yaml:\d+:\d+: .*runing"):
        run_backtest(Options(config(), (recording,), policies=policies))


def test_a_recording_without_ticks_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "rec.jsonl"
    empty.write_text("")
    policies = write_policy(tmp_path / "a", "busy", busy())
    with pytest.raises(BacktestError, match="no usable tick"):
        run_backtest(Options(config(), (empty,), policies=policies))
