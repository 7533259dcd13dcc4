"""Flaps (a policy that keeps firing, a knob pushed back and forth) and the diff of versions."""

from __future__ import annotations

from pathlib import Path

from daemon.app.backtest.report import diff_lines, document, timeline_lines
from daemon.app.backtest.runner import Options, run_backtest
from tests.unit.backtest.worlds import busy, config, series, write_policy, write_recording

KNOBS = {"max_num_seqs": 256.0}
UP = """\
name: queue-up
description: More sequences while requests wait.
targets: ["*"]
when: waiting > 5.0
action:
  set: {max_num_seqs: "current + 64.0"}
cooldown: 10m
"""
DOWN = """\
name: kv-down
description: Fewer sequences while the KV cache is full.
targets: ["*"]
when: kv_usage > 0.9
action:
  set: {max_num_seqs: "current - 64.0"}
cooldown: 10m
"""


def test_a_policy_firing_again_and_again_flaps_once_per_burst(tmp_path: Path) -> None:
    on_off = series(*[(4, {"running": 12.0}), (4, {"running": 2.0})] * 6)  # 4 min, 6 fires
    recording = write_recording(tmp_path / "rec.jsonl", on_off, KNOBS)
    policies = write_policy(tmp_path / "a", "busy", busy())
    outcome = run_backtest(Options(config(), (recording,), policies=policies))
    assert outcome.a is not None
    fires = [e.at_s for e in outcome.a.events if e.kind == "fired"]
    assert len(fires) == 6
    flaps = [(f.kind, f.policy, f.at_s) for f in outcome.a.flaps]
    assert flaps == [("policy", "busy", fires[3])]  # the 4th fire is more than 3 in an hour
    relaxed = run_backtest(Options(config(), (recording,), policies=policies, max_fires_per_hour=6))
    assert relaxed.a is not None
    assert not relaxed.a.flaps


def test_a_knob_moved_up_then_down_within_five_minutes_flaps(tmp_path: Path) -> None:
    ticks = series((12, {"waiting": 8.0}), (12, {"kv_usage": 0.95}))
    recording = write_recording(tmp_path / "rec.jsonl", ticks, KNOBS)
    policies = write_policy(write_policy(tmp_path / "a", "up", UP), "down", DOWN)
    outcome = run_backtest(Options(config(dwell_s=0), (recording,), policies=policies))
    assert outcome.a is not None
    moves = [(e.policy, e.changes) for e in outcome.a.events if e.kind == "intent"]
    assert moves == [("queue-up", {"max_num_seqs": 320.0}), ("kv-down", {"max_num_seqs": 192.0})]
    [flap] = outcome.a.flaps
    assert (flap.kind, flap.knob, flap.policy, flap.at_s) == ("knob", "max_num_seqs", "kv-down", 60)
    assert "down to 192 60 s after queue-up moved it up" in flap.detail
    text = "\n".join(timeline_lines(outcome.a))
    assert "knob max_num_seqs flap" in text
    # A slower reversal is no flap.
    patient = run_backtest(
        Options(config(dwell_s=0), (recording,), policies=policies, reversal_s=30.0)
    )
    assert patient.a is not None
    assert not patient.a.flaps


def test_the_diff_of_two_thresholds_shows_what_only_one_would_do(tmp_path: Path) -> None:
    ticks = series((20, {"running": 8.0}), (20, {"running": 30.0}), (20, {"running": 2.0}))
    recording = write_recording(tmp_path / "rec.jsonl", ticks, KNOBS)
    old = write_policy(tmp_path / "old", "busy", busy(threshold=5))
    new = write_policy(tmp_path / "new", "busy", busy(threshold=20))
    outcome = run_backtest(Options(config(), (recording,), policies=old, against=new))
    assert outcome.a is not None
    assert outcome.b is not None
    sides = [(d.side, (d.a or d.b).kind, (d.a or d.b).at_s) for d in outcome.differences]  # type: ignore[union-attr]
    # Old fires at 10 s on 8 running; new only once 30 run (from 100 s), and acts then, where
    # old is in its cooldown.
    assert ("only_a", "fired", 10.0) in sides
    assert ("only_a", "intent", 10.0) in sides
    assert ("only_b", "fired", 110.0) in sides
    assert ("only_b", "intent", 110.0) in sides
    both_resolve = [d for d in outcome.differences if d.a and d.a.kind == "resolved"]
    assert not both_resolve, "both resolve at the same tick: no difference there"
    lines = diff_lines(outcome.differences)
    assert lines[0].startswith("diff: ")
    assert any(line.startswith("  A only") and "fired" in line for line in lines)
    body = document(outcome.recording, outcome.a, outcome.b, outcome.differences)
    assert {entry["side"] for entry in body["diff"]} == {"only_a", "only_b"}
    assert body["recording"]["ticks"] == 60
    assert body["a"]["summary"]["decisions"]["fired"] == 1


def test_the_same_policies_twice_do_not_differ(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "rec.jsonl", series((30, {"running": 12.0})), KNOBS)
    policies = write_policy(tmp_path / "a", "busy", busy())
    outcome = run_backtest(Options(config(), (recording,), policies=policies, against=policies))
    assert outcome.differences == ()
    assert diff_lines(outcome.differences) == ["diff: the two timelines agree"]


def test_a_changed_value_is_a_difference_not_two(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "rec.jsonl", series((20, {"running": 12.0})), KNOBS)
    half = write_policy(tmp_path / "a", "busy", busy())
    gentle = write_policy(tmp_path / "b", "busy", busy().replace("* 0.5", "* 0.9"))
    outcome = run_backtest(Options(config(), (recording,), policies=half, against=gentle))
    # The intent at 10 s, and the dwell's block at 70 s, which shows each one's wanted value.
    assert [(d.side, d.index) for d in outcome.differences] == [("different", 2), ("different", 14)]
    difference = outcome.differences[0]
    assert difference.a is not None
    assert difference.b is not None
    assert difference.a.changes == {"max_num_seqs": 192.0}
    assert difference.b.changes == {"max_num_seqs": 231.0}  # 230.4, rounded towards 256
