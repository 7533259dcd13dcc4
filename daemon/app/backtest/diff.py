"""The difference between two timelines of the same recording (policy versions A and B).

Both replays read the same ticks, so decisions line up by tick: two decisions are the same one
when they share tick, policy, target and kind. A decision of A with no such partner in B is
``only_a`` (and the other way round ``only_b``); partners that differ in what they say (route,
guard, knob values, operation) are ``different``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import zip_longest

from daemon.app.backtest.timeline import Event

_Key = tuple[int, str, str, str]  # (tick index, policy, target, kind)


@dataclass(frozen=True, slots=True)
class Difference:
    """One place where the two timelines disagree."""

    side: str  # "only_a", "only_b" or "different"
    a: Event | None
    b: Event | None

    @property
    def index(self) -> int:
        """The tick it happened at."""
        event = self.a or self.b
        assert event is not None
        return event.index


def diff(a: Sequence[Event], b: Sequence[Event]) -> list[Difference]:
    """Where ``a`` and ``b`` disagree, in timeline order."""
    left, right = _by_key(a), _by_key(b)
    differences: list[Difference] = []
    # By tick, and within a tick in the order the decisions were taken (A's first).
    keys = sorted(dict.fromkeys([*left, *right]), key=lambda key: key[0])
    for key in keys:
        pairs = zip_longest(left.get(key, []), right.get(key, []))
        for one, other in pairs:
            if other is None:
                differences.append(Difference("only_a", one, None))
            elif one is None:
                differences.append(Difference("only_b", None, other))
            elif _says(one) != _says(other):
                differences.append(Difference("different", one, other))
    return differences


def _by_key(events: Sequence[Event]) -> dict[_Key, list[Event]]:
    keyed: dict[_Key, list[Event]] = {}
    for event in events:
        keyed.setdefault((event.index, event.policy, event.target, event.kind), []).append(event)
    return keyed


def _says(event: Event) -> tuple[object, ...]:
    changes = tuple(sorted((event.changes or {}).items()))
    return (event.route, event.guard, changes, event.operation)
