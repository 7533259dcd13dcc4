"""Window functions over a gauge's recent points: average, maximum, minimum.

Like the counter and histogram derivations, each answers None when the points inside the
window ``(now - window_s, now]`` do not span ``min_coverage`` of it: "the KV cache was above
90% on average over five minutes" must not be claimed from ten seconds of data.
"""

from __future__ import annotations

from collections.abc import Sequence

from daemon.sources.derivations import (
    DEFAULT_MIN_COVERAGE,
    Point,
    points_in_window,
    window_covered,
)


def _window_values(
    points: Sequence[Point], window_s: float, now: float, min_coverage: float
) -> list[float] | None:
    inside = points_in_window(points, window_s, now)
    if not window_covered(inside, window_s, min_coverage):
        return None
    return [value for _, value in inside]


def avg_over_window(
    points: Sequence[Point],
    window_s: float,
    now: float,
    *,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
) -> float | None:
    """Mean of the samples inside the window (each sample weighs the same, as in PromQL)."""
    values = _window_values(points, window_s, now, min_coverage)
    return None if values is None else sum(values) / len(values)


def max_over_window(
    points: Sequence[Point],
    window_s: float,
    now: float,
    *,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
) -> float | None:
    """Largest sample inside the window."""
    values = _window_values(points, window_s, now, min_coverage)
    return None if values is None else max(values)


def min_over_window(
    points: Sequence[Point],
    window_s: float,
    now: float,
    *,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
) -> float | None:
    """Smallest sample inside the window."""
    values = _window_values(points, window_s, now, min_coverage)
    return None if values is None else min(values)
