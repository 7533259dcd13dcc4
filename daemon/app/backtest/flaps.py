"""Flaps: a policy that keeps firing and resolving, a knob pushed one way and then back.

* A policy flaps on a target when it starts firing more than ``max_fires_per_hour`` times
  within any hour: its thresholds sit inside the signal's noise, or ``for`` and
  ``keep_firing_for`` are too short. Reported once per burst, at the fire that crossed the line.
* A knob flaps when it would have moved one way and then the other within ``reversal_s``
  (5 minutes by default): two policies, or one policy's action and its own hysteresis, fight.
  Every move that passed the planner and the gate counts, whether automatic or proposed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from daemon.app.backtest.timeline import Event
from daemon.policy.state import HOUR_S

DEFAULT_MAX_FIRES_PER_HOUR = 3
DEFAULT_REVERSAL_S = 300.0


@dataclass(frozen=True, slots=True)
class Flap:
    """One flap, located on the timeline."""

    kind: str  # "policy" or "knob"
    target: str
    policy: str  # the policy that fired, or that made the second, reversing move
    knob: str | None
    index: int
    at_s: float
    wall: datetime
    detail: str


def find_flaps(
    events: Sequence[Event],
    *,
    max_fires_per_hour: int = DEFAULT_MAX_FIRES_PER_HOUR,
    reversal_s: float = DEFAULT_REVERSAL_S,
) -> list[Flap]:
    """Every flap in ``events``, in timeline order."""
    flaps = _policy_flaps(events, max_fires_per_hour) + _knob_flaps(events, reversal_s)
    return sorted(flaps, key=lambda flap: (flap.index, flap.kind, flap.target, flap.policy))


def _policy_flaps(events: Sequence[Event], limit: int) -> list[Flap]:
    flaps: list[Flap] = []
    recent: dict[tuple[str, str], deque[float]] = {}
    flapping: set[tuple[str, str]] = set()
    for event in events:
        if event.kind != "fired":
            continue
        key = (event.policy, event.target)
        fires = recent.setdefault(key, deque())
        fires.append(event.at_s)
        while event.at_s - fires[0] >= HOUR_S:
            fires.popleft()
        if len(fires) <= limit:
            flapping.discard(key)
        elif key not in flapping:
            flapping.add(key)
            detail = f"fired {len(fires)} times within an hour (more than {limit})"
            flaps.append(_flap("policy", event, None, detail))
    return flaps


def _knob_flaps(events: Sequence[Event], window_s: float) -> list[Flap]:
    flaps: list[Flap] = []
    last: dict[tuple[str, str], tuple[Event, float]] = {}  # (target, knob) -> move, direction
    for event in events:
        if event.kind != "intent" or event.route is None or not event.changes:
            continue
        for knob, value in event.changes.items():
            was = (event.current or {}).get(knob)
            if was is None or value == was:
                continue
            direction = 1.0 if value > was else -1.0
            key = (event.target, knob)
            before = last.get(key)
            if before is not None:
                previous, previous_direction = before
                waited = event.at_s - previous.at_s
                if previous_direction != direction and waited <= window_s:
                    detail = (
                        f"{knob} {'up' if direction > 0 else 'down'} to {value:g} {waited:.0f} s "
                        f"after {previous.policy} moved it "
                        f"{'up' if previous_direction > 0 else 'down'}"
                    )
                    flaps.append(_flap("knob", event, knob, detail))
            last[key] = (event, direction)
    return flaps


def _flap(kind: str, event: Event, knob: str | None, detail: str) -> Flap:
    return Flap(kind, event.target, event.policy, knob, event.index, event.at_s, event.wall, detail)
