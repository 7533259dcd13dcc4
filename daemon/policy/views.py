"""From what the sources see (signal rows) to what a policy sees (one view per target).

A view holds only values fit to act on (state ``ok``): a stale or missing signal is simply
absent, which evaluation reads as "no data". Per-target vLLM signals come from the row for the
whole server (not per engine); host and GPU series become maps keyed by their identifying
label; other host-wide scalars (load) are shared by every target. Signals computed from a
signal and a knob (``gate_cap_share``, :mod:`daemon.policy.knob_signals`) are added last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from daemon.policy.evaluate import TargetView
from daemon.policy.expressions import MAP_SIGNALS, SCALAR_SIGNALS
from daemon.policy.knob_signals import with_knob_signals
from daemon.sources.view import OK, SignalRow


def target_views(
    rows: Iterable[SignalRow],
    targets: Iterable[str],
    knobs: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, TargetView]:
    """One view per target from the current rows; ``knobs`` are known current knob values."""
    per_target: dict[str, dict[str, Any]] = {target: {} for target in targets}
    shared: dict[str, Any] = {}
    for row in rows:
        if row.state != OK or row.value is None:
            continue
        if row.target is not None:
            if "engine" not in row.labels and row.target in per_target:
                per_target[row.target][row.name] = row.value
        elif row.name in MAP_SIGNALS:
            key = row.labels.get(MAP_SIGNALS[row.name], "")
            shared.setdefault(row.name, {})[key] = row.value
        elif row.name in SCALAR_SIGNALS:
            shared[row.name] = row.value
    known = knobs or {}
    return {
        target: TargetView(
            target,
            with_knob_signals({**shared, **signals}, known.get(target, {})),
            dict(known.get(target, {})),
        )
        for target, signals in per_target.items()
    }
