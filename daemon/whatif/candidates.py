"""The settings a what-if compares: ``max_num_seqs`` x ``max_num_batched_tokens`` in envelopes.

Each knob with an envelope takes its powers of two inside ``[min, max]``, the bounds themselves
and the value in force; a knob without one stays at the value in force (the governor may not
move it). Pairs vLLM would refuse (a token budget below the sequence cap, with chunked prefill
on) are left out, as the simulator's settings check says.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from daemon.core.settings import Envelope

TUNED = ("max_num_seqs", "max_num_batched_tokens")
"""The knobs a what-if varies; the other knobs the simulator models stay as they are."""

_MOST_PER_KNOB = 8


@dataclass(frozen=True, slots=True, order=True)
class Setting:
    """One candidate: the two knobs a what-if varies."""

    max_num_seqs: int
    max_num_batched_tokens: int

    def label(self) -> str:
        """``SEQSxTOKENS``, as ``simulate`` names a static grid point."""
        return f"{self.max_num_seqs}x{self.max_num_batched_tokens}"

    def as_knobs(self) -> dict[str, int]:
        """The setting as knob values."""
        return {
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
        }


def knob_values(current: int, envelope: Envelope | None) -> list[int]:
    """The values one knob takes in the grid (see the module docstring)."""
    if envelope is None:
        return [current]
    low, high = math.ceil(envelope.min), math.floor(envelope.max)
    if high < 1 or low > high:
        return [current]
    low = max(low, 1)
    values = {low, high}
    power = 1 << max(0, math.ceil(math.log2(low)))
    while power <= high:
        values.add(power)
        power <<= 1
    if low <= current <= high:
        values.add(current)
    return _thinned(sorted(values), current)


def candidate_grid(current: Setting, envelopes: Mapping[str, Envelope]) -> list[Setting]:
    """Every candidate pair, the setting in force among them."""
    seqs = knob_values(current.max_num_seqs, envelopes.get("max_num_seqs"))
    tokens = knob_values(current.max_num_batched_tokens, envelopes.get("max_num_batched_tokens"))
    grid = {Setting(s, t) for s in seqs for t in tokens}
    grid.add(current)
    return sorted(grid)


def within_one_step(
    candidate: Setting, current: Setting, envelopes: Mapping[str, Envelope]
) -> bool:
    """Whether every knob of ``candidate`` is within its ``max_step`` of the value in force."""
    now, then = current.as_knobs(), candidate.as_knobs()
    return all(
        abs(then[knob] - now[knob]) <= envelope.max_step for knob, envelope in envelopes.items()
    )


def _thinned(values: list[int], keep: int) -> list[int]:
    """At most ``_MOST_PER_KNOB`` values, spread evenly, the bounds and ``keep`` kept."""
    if len(values) <= _MOST_PER_KNOB:
        return values
    step = (len(values) - 1) / (_MOST_PER_KNOB - 1)
    chosen = {values[round(index * step)] for index in range(_MOST_PER_KNOB)}
    if keep in values:
        chosen.add(keep)
    return sorted(chosen)
