"""Decisions written the way a test file writes them, so a report can be pasted into a test.

``{policy: kv-thrash, target: main, kind: intent, set: {max_num_seqs: 192}}``
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from daemon.policy.decisions import Evidence
from daemon.policy.testing.suites import ExpectedDecision
from daemon.policy.testing.timing import format_seconds
from daemon.policy.testing.world import Event


def number(value: float) -> str:
    """``192`` rather than ``192.0``; other values exactly as Python spells them."""
    return str(int(value)) if float(value).is_integer() else repr(value)


def render_expected(expected: ExpectedDecision) -> str:
    """The keys the pattern gives, in the order a test writes them."""
    return _flow(
        [
            ("policy", expected.policy),
            ("target", expected.target),
            ("kind", expected.kind),
            ("set", _knobs(expected.set)),
            ("guard", expected.guard),
            ("operation", expected.operation),
        ]
    )


def render_event(event: Event) -> str:
    """Everything a pattern could match of ``event``."""
    return _flow(
        [
            ("policy", event.policy),
            ("target", event.target),
            ("kind", event.kind),
            ("set", _knobs(event.changes) if event.changes else None),
            ("guard", event.guard),
            ("operation", event.operation),
        ]
    )


def render_evidence(event: Event) -> list[str]:
    """Why ``event`` happened: the values read, how long the condition held, the reason.

    A resolve's condition is the exit condition, and "held" how long *it* held; how long the
    policy had fired is a line of its own.
    """
    lines = []
    if event.evidence is not None:
        lines.append("evidence: " + _evidence(event.evidence))
    if event.firing_for_s is not None:
        lines.append(f"fired for {format_seconds(event.firing_for_s)}")
    if event.reason:
        lines.append(f"reason: {event.reason}")
    return lines


def _evidence(evidence: Evidence) -> str:
    values = ", ".join(f"{name}={_value(value)}" for name, value in evidence.signals.items())
    held = "" if evidence.held_for_s is None else f"; held {format_seconds(evidence.held_for_s)}"
    return f"{values or 'no signal'} (condition: {evidence.condition}{held})"


def _value(value: Any) -> str:
    if value is None:
        return "no data"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k!r}: {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, int | float):
        return number(value)
    return repr(value)


def _knobs(values: Mapping[str, float] | None) -> str | None:
    if values is None:
        return None
    return "{" + ", ".join(f"{knob}: {number(value)}" for knob, value in values.items()) + "}"


def _flow(items: list[tuple[str, str | None]]) -> str:
    return "{" + ", ".join(f"{key}: {value}" for key, value in items if value is not None) + "}"
