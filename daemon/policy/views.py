"""From what the sources see (signal rows) to what a policy sees (one view per target).

A view holds only values fit to act on (state ``ok``): a stale, missing or implausible signal
is simply absent, which evaluation reads as "no data"; an implausible one is also named in the
view's ``implausible``, with the reason, for ``explain`` to show. Per-target vLLM signals come
from the row for the whole server (not per engine). The other sources' signals are shared by
every target, shaped as their source declares them (:mod:`daemon.sources.registry`): a map
keyed by its label (host, GPU, a keyed Prometheus query or MQTT subscription), or a scalar.
Where the series disagree about one value (a scalar with several series, two series of a map
with one key), that value is ambiguous and absent: no data, never a pick. Signals computed from
a signal and a knob (``gate_cap_share``, :mod:`daemon.policy.knob_signals`) are added last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from daemon.policy.evaluate import TargetView
from daemon.policy.knob_signals import with_knob_signals
from daemon.sources.declarations import SignalRegistry
from daemon.sources.registry import BUILTIN
from daemon.sources.view import IMPLAUSIBLE, OK, SignalRow


def target_views(
    rows: Iterable[SignalRow],
    targets: Iterable[str],
    knobs: Mapping[str, Mapping[str, float]] | None = None,
    signals: SignalRegistry = BUILTIN,
) -> dict[str, TargetView]:
    """One view per target from the current rows.

    ``knobs`` are known current knob values; ``signals`` the declared signals (the policies'
    registry: the shared signals it does not declare are left out).
    """
    per_target: dict[str, dict[str, Any]] = {target: {} for target in targets}
    implausible: dict[str | None, dict[str, str]] = {target: {} for target in targets}
    shared: dict[str, Any] = {}
    ambiguous: set[tuple[str, str | None]] = set()
    keys = signals.map_keys()
    scalars = signals.shared_scalars()
    for row in rows:
        if row.state == IMPLAUSIBLE and "engine" not in row.labels:
            _note_implausible(implausible, row)
        if row.state != OK or row.value is None:
            continue
        if row.target is not None:
            if "engine" not in row.labels and row.target in per_target:
                per_target[row.target][row.name] = row.value
        elif row.name in keys:
            key = row.labels.get(keys[row.name], "")
            values = shared.setdefault(row.name, {})
            if key in values or (row.name, key) in ambiguous:
                ambiguous.add((row.name, key))
                values.pop(key, None)
            else:
                values[key] = row.value
        elif row.name in scalars:
            if row.name in shared or (row.name, None) in ambiguous:
                ambiguous.add((row.name, None))
                shared.pop(row.name, None)
            else:
                shared[row.name] = row.value
    known = knobs or {}
    shared_implausible = implausible.get(None, {})
    return {
        target: TargetView(
            target,
            with_knob_signals({**shared, **signals}, known.get(target, {})),
            dict(known.get(target, {})),
            {**shared_implausible, **implausible[target]},
        )
        for target, signals in per_target.items()
    }


def _note_implausible(implausible: dict[str | None, dict[str, str]], row: SignalRow) -> None:
    """Keep the reason of an implausible row: its target's, or every target's when shared."""
    if row.target is not None and row.target not in implausible:
        return
    reasons = implausible.setdefault(row.target, {})
    key = ",".join(f"{k}={v}" for k, v in sorted(row.labels.items()))
    reason = f"{row.reason} ({key})" if key and row.target is None else row.reason
    reasons.setdefault(row.name, reason)
