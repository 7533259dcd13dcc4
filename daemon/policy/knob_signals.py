"""Per-target signals computed from a signal and a knob's current value, where views are built.

The slow policies that coordinate with the admission gate must compare the gate's cap with
vLLM's ``max-num-seqs``, a knob rather than a signal. ``gate_cap_share`` is that comparison:
``gate_cap / max_num_seqs`` (1.0: the gate is as open as vLLM itself; 0.25: it admits a
quarter of what vLLM would run). It exists only when both are known: no gate, a stale gate or
an unknown ``max_num_seqs`` is no data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# name -> (signal, knob): the signal divided by the knob's current value.
KNOB_SIGNALS: Mapping[str, tuple[str, str]] = {
    "gate_cap_share": ("gate_cap", "max_num_seqs"),
}


def with_knob_signals(signals: Mapping[str, Any], knobs: Mapping[str, float]) -> dict[str, Any]:
    """``signals`` plus every knob signal whose signal and knob are both known (and not 0)."""
    result = dict(signals)
    for name, (signal, knob) in KNOB_SIGNALS.items():
        value, divisor = signals.get(signal), knobs.get(knob)
        if not isinstance(value, int | float) or not isinstance(divisor, int | float):
            continue
        if divisor > 0 and math.isfinite(value) and math.isfinite(divisor):
            result[name] = float(value) / float(divisor)
    return result
