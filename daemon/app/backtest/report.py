"""Backtest results for people (lines of text) and for tools (one JSON document).

The JSON document::

    {"recording": {"ticks", "from", "to", "targets", "warnings"},
     "a": {"policies": DIR, "timeline": [EVENT...], "flaps": [FLAP...], "summary": {...}},
     "b": {... the same, with --against ...},
     "diff": [{"side": "only_a" | "only_b" | "different", "a": EVENT | null, "b": ...}]}

An EVENT is :class:`~daemon.app.backtest.timeline.Event` with ``wall`` in ISO 8601.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from daemon.app.backtest.diff import Difference
from daemon.app.backtest.flaps import Flap
from daemon.app.backtest.recording import Recording
from daemon.app.backtest.timeline import Event
from daemon.policy.testing.timing import format_seconds


@dataclass(frozen=True, slots=True)
class Timeline:
    """One replay's result: its events and flaps, and where its policies came from."""

    policies: str
    events: tuple[Event, ...]
    flaps: tuple[Flap, ...]


def summary(timeline: Timeline) -> dict[str, Any]:
    """Counts: decisions by kind, intents by route, blocks by guard, flaps by kind."""
    kinds = Counter(event.kind for event in timeline.events)
    routes = Counter(e.route for e in timeline.events if e.kind == "intent" and e.route)
    guards = Counter(e.guard for e in timeline.events if e.kind == "blocked" and e.guard)
    flaps = Counter(flap.kind for flap in timeline.flaps)
    return {
        "decisions": dict(sorted(kinds.items())),
        "intents": dict(sorted(routes.items())),
        "blocked": dict(sorted(guards.items())),
        "flaps": dict(sorted(flaps.items())),
    }


def event_json(event: Event) -> dict[str, Any]:
    """An event as the JSON document spells it."""
    return {**asdict(event), "wall": event.wall.isoformat()}


def flap_json(flap: Flap) -> dict[str, Any]:
    """A flap as the JSON document spells it."""
    return {**asdict(flap), "wall": flap.wall.isoformat()}


def document(
    recording: Recording,
    a: Timeline,
    b: Timeline | None = None,
    differences: Sequence[Difference] = (),
) -> dict[str, Any]:
    """The whole result as one JSON-ready document (see the module docstring)."""
    ticks = recording.ticks
    result: dict[str, Any] = {
        "recording": {
            "ticks": len(ticks),
            "from": ticks[0].wall.isoformat() if ticks else None,
            "to": ticks[-1].wall.isoformat() if ticks else None,
            "targets": recording.targets(),
            "warnings": list(recording.warnings),
        },
        "a": _timeline_json(a),
    }
    if b is not None:
        result["b"] = _timeline_json(b)
        result["diff"] = [
            {
                "side": difference.side,
                "a": None if difference.a is None else event_json(difference.a),
                "b": None if difference.b is None else event_json(difference.b),
            }
            for difference in differences
        ]
    return result


def _timeline_json(timeline: Timeline) -> dict[str, Any]:
    return {
        "policies": timeline.policies,
        "timeline": [event_json(event) for event in timeline.events],
        "flaps": [flap_json(flap) for flap in timeline.flaps],
        "summary": summary(timeline),
    }


def timeline_lines(timeline: Timeline) -> list[str]:
    """The would-have timeline, a line per decision, then the flaps and a summary."""
    lines = [f"policies {timeline.policies}: {len(timeline.events)} decision(s)"]
    lines.extend(f"  {event_line(event)}" for event in timeline.events)
    if timeline.flaps:
        lines.append(f"flaps: {len(timeline.flaps)}")
        lines.extend(f"  {flap_line(flap)}" for flap in timeline.flaps)
    else:
        lines.append("flaps: none")
    counts = summary(timeline)
    lines.append(
        "summary: "
        + "; ".join(
            f"{name} " + ", ".join(f"{key} {value}" for key, value in values.items())
            for name, values in counts.items()
            if values
        )
        if any(counts.values())
        else "summary: no decisions"
    )
    return lines


def event_line(event: Event) -> str:
    """``+2m10s 19:40:05  main  busy  intent auto  max_num_seqs 256 -> 192``."""
    head = f"{_when(event.at_s, event)}  {event.target}  {event.policy}  {event.kind}"
    if event.kind == "intent":
        way = event.route or "(blocked at the gate)"
        return f"{head} {way}  {_what(event)}"
    if event.kind in ("blocked", "shadow"):
        guard = f" {event.guard}" if event.guard else ""
        reason = f": {event.reason}" if event.reason else ""
        return f"{head}{guard}  {_what(event)}{reason}"
    signals = " ".join(f"{name}={_number(value)}" for name, value in event.signals.items())
    return f"{head}  {signals}".rstrip()


def flap_line(flap: Flap) -> str:
    """``+12m 19:52:00  main  busy  policy flap: fired 4 times within an hour``."""
    knob = f" {flap.knob}" if flap.knob else ""
    return f"{_when(flap.at_s, flap)}  {flap.target}  {flap.policy}  {flap.kind}{knob} flap: " + (
        flap.detail
    )


def diff_lines(differences: Sequence[Difference]) -> list[str]:
    """``A only``, ``B only`` and ``A != B`` lines, in timeline order."""
    if not differences:
        return ["diff: the two timelines agree"]
    counts = Counter(difference.side for difference in differences)
    lines = [
        f"diff: {counts['only_a']} only in A, {counts['only_b']} only in B, "
        f"{counts['different']} different"
    ]
    for difference in differences:
        if difference.side == "only_a" and difference.a is not None:
            lines.append(f"  A only  {event_line(difference.a)}")
        elif difference.side == "only_b" and difference.b is not None:
            lines.append(f"  B only  {event_line(difference.b)}")
        elif difference.a is not None and difference.b is not None:
            lines.append(f"  A       {event_line(difference.a)}")
            lines.append(f"  B       {event_line(difference.b)}")
    return lines


def _when(at_s: float, located: Event | Flap) -> str:
    return f"+{format_seconds(round(at_s, 1)):<8} {located.wall:%Y-%m-%d %H:%M:%S}"


def _what(event: Event) -> str:
    if event.operation:
        return f"operation {event.operation}"
    current = event.current or {}
    moves = [
        f"{knob} {_number(current.get(knob))} -> {_number(value)}"
        for knob, value in (event.changes or {}).items()
    ]
    return ", ".join(moves) or "(no change)"


def _number(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_number(v)}" for k, v in value.items()) + "}"
    return "?" if value is None else str(value)
