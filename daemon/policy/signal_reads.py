"""The signals a set of policies reads: what a view must compute for them, and no more.

A view's cost is its catalogue signals: each p50, p95 or p99 reads a window of every bucket of
its histogram, for every server. The evaluator's views are read by the policies' conditions
(``when``, ``clear``), their knobs' new values and their batch lanes' widths, by the batch
lane's fcfs check (``waiting`` and ``running``), and through a signal computed from a signal
and a knob (``gate_cap_share`` reads ``gate_cap``): those are the signals a view needs.
A notification's fields, an approval's re-check and ``explain`` read the condition's signals,
already counted. Everything else a view would hold is computed for nobody.
"""

from __future__ import annotations

from collections.abc import Iterable

from daemon.policy.expressions import CURRENT, Expression
from daemon.policy.knob_signals import KNOB_SIGNALS
from daemon.policy.spec import PolicySpec

# The batch lane's fcfs check reads these of every view that has a lane open.
LANE_READS = frozenset({"waiting", "running"})


def signals_read(specs: Iterable[PolicySpec]) -> frozenset[str]:
    """Every signal name the policies ``specs`` may read from a view, at any tick."""
    names: set[str] = set(LANE_READS)
    for spec in specs:
        for expression in _expressions(spec):
            names |= expression.signals
    names.discard(CURRENT)
    for name, (signal, _knob) in KNOB_SIGNALS.items():
        if name in names:
            names.add(signal)
    return frozenset(names)


def _expressions(spec: PolicySpec) -> Iterable[Expression]:
    yield spec.when
    if spec.clear is not None:
        yield spec.clear
    action = spec.action
    if action is None:
        return
    for change in action.changes:
        yield change.value
    if action.batch is not None and action.batch.concurrency is not None:
        yield action.batch.concurrency
    if action.batch is not None and action.batch.start_spacing is not None:
        yield action.batch.start_spacing
