"""``gate_cap_share``: the gate's cap over the instance's max-num-seqs, where views are built."""

from __future__ import annotations

import math

from daemon.policy.knob_signals import with_knob_signals
from daemon.policy.views import target_views
from daemon.sources.view import OK, STALE, SignalRow


def test_the_share_is_the_cap_over_max_num_seqs() -> None:
    assert with_knob_signals({"gate_cap": 48.0}, {"max_num_seqs": 64.0})["gate_cap_share"] == 0.75


def test_without_either_side_or_with_a_zero_knob_there_is_no_share() -> None:
    assert "gate_cap_share" not in with_knob_signals({"gate_cap": 48.0}, {})
    assert "gate_cap_share" not in with_knob_signals({}, {"max_num_seqs": 64.0})
    assert "gate_cap_share" not in with_knob_signals({"gate_cap": 48.0}, {"max_num_seqs": 0.0})
    assert "gate_cap_share" not in with_knob_signals({"gate_cap": math.nan}, {"max_num_seqs": 8})


def test_views_carry_the_share_only_for_a_fresh_gate() -> None:
    rows = [
        SignalRow("gate_cap", "a", {}, 16.0, "haproxy-a", 0.5, OK),
        SignalRow("gate_cap", "b", {}, None, "haproxy-b", 9.0, STALE),
    ]
    knobs = {"a": {"max_num_seqs": 64.0}, "b": {"max_num_seqs": 64.0}}
    views = target_views(rows, ["a", "b"], knobs)
    assert views["a"].signals["gate_cap_share"] == 0.25
    assert "gate_cap_share" not in views["b"].signals
