"""Pure derivations over a series' recent points: counter rates and windowed histogram quantiles.

A point is ``(at, value)`` on the loop clock, oldest first, as the signal store keeps them.
Every function takes ``now`` from its caller and answers None for "not enough data" — never
0, which a policy would read as "nothing happened".

The window is ``(now - window_s, now]``, open on the left like a Prometheus 3 range selector.
Unlike PromQL's ``rate`` and ``increase``, nothing is extrapolated to the window's edges: the
increase is measured between the oldest and the newest point inside the window and the rate
divides it by the time between those two points. So the window is *covered* only when those
points are at least ``min_coverage`` of the window apart; a rate over five seconds of a
sixty-second window (just after start-up, or when the source went quiet) is None.

A counter only rises, except when its server restarts and it counts again from zero. So a
drop is read as a reset only when it falls to near zero: to at most a tenth of the value
before it, or to at most ``RESET_FLOOR``. Any other drop, and a value that is no count at all
(negative, or beyond 2^53), raise :class:`~daemon.sources.domains.Implausible`: a counter read
alternately from two exporters (1000, 999, 1000...) must not pass for 999 events per scrape.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence

from daemon.sources.domains import COUNT, Implausible
from daemon.sources.samples import Sample

Point = tuple[float, float]

DEFAULT_MIN_COVERAGE = 0.5
"""Share of the window the points inside it must span, by default."""

RESET_SHARE = 0.1
"""A drop to at most this share of the value before it is a reset (a restart from zero).

The first scrape after a restart sees what the server counted since it began to serve: the
source polls a refusing (loading) server at its interval, so that is about one interval's
worth, which is a tenth of the value before once the server had served ten intervals (20 s at
the default 2 s). A restart sooner than that is read as implausible for one window: the
governor then holds, which is the safe side.
"""

RESET_FLOOR = 10.0
"""A drop to at most this value is a reset whatever the value before: slow counters
(preemptions, errors) restart at a handful, which can exceed a tenth of a handful."""


def points_of(samples: Iterable[Sample]) -> list[Point]:
    """The ``(at, value)`` points of samples of one series, in the order given."""
    return [(sample.at, sample.value) for sample in samples]


def buckets_of(samples: Iterable[Sample]) -> dict[float, list[Point]]:
    """Points of one histogram's ``_bucket`` samples, grouped by their bound ``le``.

    Samples without a numeric ``le`` are skipped. The samples must belong to one histogram
    series (same name and labels apart from ``le``), oldest first.
    """
    buckets: dict[float, list[Point]] = {}
    for sample in samples:
        bound = sample.key.label("le")
        if bound is None:
            continue
        try:
            upper = float(bound)
        except ValueError:
            continue
        buckets.setdefault(upper, []).append((sample.at, sample.value))
    return buckets


def points_in_window(points: Sequence[Point], window_s: float, now: float) -> list[Point]:
    """The finite points inside ``(now - window_s, now]``; ``window_s`` must be positive."""
    if window_s <= 0:
        message = f"window_s must be positive, not {window_s}"
        raise ValueError(message)
    start = now - window_s
    return [point for point in points if start < point[0] <= now and math.isfinite(point[1])]


def window_covered(points: Sequence[Point], window_s: float, min_coverage: float) -> bool:
    """Whether in-window ``points`` span at least ``min_coverage`` of the window."""
    return len(points) >= 2 and points[-1][0] - points[0][0] >= min_coverage * window_s


def is_reset(before: float, after: float) -> bool:
    """Whether a counter falling from ``before`` to ``after`` restarted (fell to near zero)."""
    return after < before and (after <= RESET_FLOOR or after <= RESET_SHARE * before)


def _reset_aware_increase(points: Sequence[Point]) -> float:
    """Sum of the rises between consecutive points; a reset counts from zero.

    Raises:
        Implausible: a value is no count, or the counter fell without resetting.
    """
    return _reset_aware_rise([value for _, value in points])


def _reset_aware_rise(values: Sequence[float]) -> float:
    """:func:`_reset_aware_increase` of points with these values."""
    # Every value a count (the usual case) is checked at once; the sum is not finite when one
    # value is not. Otherwise each is looked at, for the reason naming the first that is not.
    if not (math.isfinite(sum(values)) and min(values) >= COUNT.low and max(values) <= COUNT.high):
        for value in values:
            if (problem := COUNT.problem(value)) is not None:
                message = f"a counter value {problem}"
                raise Implausible(message)
    increase = 0.0
    previous = values[0]
    for value in values[1:]:
        if value >= previous:
            increase += value - previous
        elif is_reset(previous, value):
            increase += value
        else:
            message = (
                f"the counter fell from {previous:g} to {value:g} without resetting (a reset"
                f" falls to at most {RESET_SHARE:g} of the value before, or to {RESET_FLOOR:g})"
            )
            raise Implausible(message)
        previous = value
    return increase


def counter_increase(
    points: Sequence[Point],
    window_s: float,
    now: float,
    *,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
) -> float | None:
    """How much a counter rose between the oldest and newest points inside the window.

    Resets are handled like PromQL's ``increase`` when they are resets: when a value falls to
    near zero (see the module docstring), the server restarted and the counter counted up from
    zero, so the lower value itself is the rise since the previous point.

    Args:
        points: ``(at, value)`` points of one counter series, oldest first.
        window_s: Length of the window ``(now - window_s, now]``, in seconds; positive.
        now: End of the window, on the clock of the points.
        min_coverage: Share of the window the in-window points must span.

    Returns:
        The increase, or None with fewer than two points in the window or when they span less
        than ``min_coverage * window_s``. NaN and infinite points are ignored.

    Raises:
        ValueError: ``window_s`` is not positive.
        Implausible: a value is no count, or the counter fell without resetting.
    """
    inside = points_in_window(points, window_s, now)
    if not window_covered(inside, window_s, min_coverage):
        return None
    return _reset_aware_increase(inside)


def counter_increase_of_columns(
    times: Sequence[float],
    values: Sequence[float],
    window_s: float,
    now: float,
    *,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
) -> float | None:
    """:func:`counter_increase` of the points ``zip(times, values)``, with the same answer.

    The times are a series' (rising): the window is one slice of them, found by bisection, and
    no point is made of a time and a value. Points with a value that is not finite go the
    points' way.
    """
    if window_s <= 0:
        message = f"window_s must be positive, not {window_s}"
        raise ValueError(message)
    first = bisect_right(times, now - window_s)
    end = bisect_right(times, now, lo=first)
    inside = values[first:end]
    if not math.isfinite(sum(inside)):  # a NaN or an infinity (or a sum that overflowed)
        points = list(zip(times, values, strict=True))
        return counter_increase(points, window_s, now, min_coverage=min_coverage)
    if end - first < 2 or times[end - 1] - times[first] < min_coverage * window_s:
        return None
    return _reset_aware_rise(inside)


def counter_rate(
    points: Sequence[Point],
    window_s: float,
    now: float,
    *,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
) -> float | None:
    """Per-second increase of a counter over the window, reset-aware.

    The :func:`counter_increase` between the oldest and newest points inside the window,
    divided by the seconds between those two points (not by ``window_s``: nothing is
    extrapolated).

    Args:
        points: ``(at, value)`` points of one counter series, oldest first.
        window_s: Length of the window ``(now - window_s, now]``, in seconds; positive.
        now: End of the window, on the clock of the points.
        min_coverage: Share of the window the in-window points must span.

    Returns:
        The rate per second, or None when the window is not covered (see
        :func:`counter_increase`).

    Raises:
        ValueError: ``window_s`` is not positive.
        Implausible: a value is no count, or the counter fell without resetting.
    """
    inside = points_in_window(points, window_s, now)
    if not window_covered(inside, window_s, min_coverage):
        return None
    return _reset_aware_increase(inside) / (inside[-1][0] - inside[0][0])


def histogram_quantile(
    q: float,
    bucket_points_by_le: Mapping[float, Sequence[Point]],
    window_s: float,
    now: float,
    *,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
) -> float | None:
    """The q-quantile of the observations a histogram made inside the window.

    Each cumulative bucket's reset-aware increase over the window (as in
    :func:`counter_increase`) gives the histogram of the window's observations; the quantile
    is then estimated exactly as Prometheus' ``histogram_quantile`` does for classic buckets:
    buckets are sorted by bound, forced monotonic; the rank ``q * total`` is located in the
    first bucket whose count reaches it and interpolated linearly inside it, the lowest bucket
    starting at 0 when its bound is positive (else its bound is the answer). A quantile in the
    ``+Inf`` bucket is the bound of the highest finite bucket.

    Where Prometheus answers NaN this answers None: no ``+Inf`` bucket, fewer than two buckets,
    no observations in the window (or a rank of 0 in an empty lowest bucket). Also None when a
    bucket does not cover the window. Unlike Prometheus, q outside [0, 1] is an error rather
    than an infinity: it can only be a programming mistake here.

    Args:
        q: The quantile, 0 to 1 (0.95 for p95).
        bucket_points_by_le: Points of each cumulative bucket series by its upper bound
            (``math.inf`` for ``+Inf``), oldest first; see :func:`buckets_of`.
        window_s: Length of the window ``(now - window_s, now]``, in seconds; positive.
        now: End of the window, on the clock of the points.
        min_coverage: Share of the window each bucket's in-window points must span.

    Returns:
        The estimated quantile in the unit of the bounds, or None (see above).

    Raises:
        ValueError: ``q`` is outside [0, 1] or ``window_s`` is not positive.
        Implausible: a bucket is no counter (see :func:`counter_increase`).
    """
    _check_quantile(q)
    buckets: list[tuple[float, float]] = []
    for upper, points in bucket_points_by_le.items():
        increase = counter_increase(points, window_s, now, min_coverage=min_coverage)
        if increase is None:
            return None
        buckets.append((upper, increase))
    return bucket_quantile(q, buckets)


def bucket_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float | None:
    """Prometheus' classic ``bucketQuantile`` over ``(upper bound, cumulative count)`` pairs.

    Args:
        q: The quantile, 0 to 1.
        buckets: Cumulative counts by upper bound, in any order; equal bounds are merged.

    Returns:
        The estimate, or None where Prometheus answers NaN (see :func:`histogram_quantile`).

    Raises:
        ValueError: ``q`` is outside [0, 1].
    """
    _check_quantile(q)
    merged: dict[float, float] = {}
    for upper, count in buckets:
        if not math.isnan(upper):
            merged[upper] = merged.get(upper, 0.0) + count
    ordered = sorted(merged.items())
    if len(ordered) < 2 or ordered[-1][0] != math.inf:
        return None
    bounds = [upper for upper, _ in ordered]
    counts = _monotonic([count for _, count in ordered])
    observations = counts[-1]
    if not observations > 0:
        return None
    rank = q * observations
    # The first bucket whose cumulative count reaches the rank; the +Inf bucket always does.
    b = next(
        index for index, count in enumerate(counts) if count >= rank or index == len(counts) - 1
    )
    if b == len(counts) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, count = 0.0, counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    if count == 0:
        return None  # only when q is 0 and the lowest bucket is empty: Prometheus gives NaN
    return start + (bounds[b] - start) * (rank / count)


def _check_quantile(q: float) -> None:
    if not 0 <= q <= 1:
        message = f"a quantile is between 0 and 1, not {q}"
        raise ValueError(message)


def _monotonic(counts: list[float]) -> list[float]:
    """The running maximum: cumulative counts can only grow with the bound.

    Deltas of separately reset buckets, or a scrape that caught a histogram mid-update, can
    break that; Prometheus repairs it the same way before searching the buckets.
    """
    repaired: list[float] = []
    highest = -math.inf
    for count in counts:
        highest = max(highest, count)
        repaired.append(highest)
    return repaired
