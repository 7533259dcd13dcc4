"""Turning the result of one PromQL instant query into samples, or saying why it gave none.

prometheus-api-client's ``custom_query`` returns only ``data.result``, without its type, so
the type is read from the shape: a scalar is ``[<time>, "<value>"]``, a vector a list of
``{"metric": {...}, "value": [<time>, "<value>"]}``, a matrix the same with ``values``.
A NaN or infinite value is no data, never a number: a policy must not act on it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import Enum

from daemon.sources.samples import Sample, SeriesKey, labels_of

# Kept on every vector series, so samples of different targets stay apart.
ALWAYS_KEPT = frozenset({"instance", "job"})


class NoData(Enum):
    """Why a query gave no sample this time, from the mildest to the worst."""

    EMPTY = "empty"  # a valid answer with no series (e.g. nothing matched)
    NOT_A_NUMBER = "not_a_number"  # every value was NaN or infinite
    AMBIGUOUS = "ambiguous"  # series collapsed into one once labels were dropped
    REJECTED = "rejected"  # Prometheus refused the query (bad PromQL, range vector)
    GARBAGE = "garbage"  # the answer was not Prometheus JSON
    UNREACHABLE = "unreachable"  # refused, timed out, or a 5xx


@dataclass(frozen=True, slots=True)
class QueryFailure:
    """No sample for one signal this time, and why."""

    reason: NoData
    message: str


def to_samples(
    signal: str, result: object, keep: Collection[str], now: float, source: str
) -> tuple[Sample, ...] | QueryFailure:
    """Samples of ``signal`` from a query result; a :class:`QueryFailure` when there are none."""
    if not isinstance(result, list):
        return QueryFailure(NoData.GARBAGE, f"unexpected result {type(result).__name__}")
    if _is_scalar(result):
        value = _number(result[1])
        if value is None:
            return QueryFailure(NoData.NOT_A_NUMBER, f"scalar {result[1]!r}")
        return (Sample(SeriesKey(signal), value, now, source),)
    return _vector_samples(signal, result, keep, now, source)


def _vector_samples(
    signal: str, result: list[object], keep: Collection[str], now: float, source: str
) -> tuple[Sample, ...] | QueryFailure:
    if not result:
        return QueryFailure(NoData.EMPTY, "no series")
    samples: dict[SeriesKey, Sample] = {}
    for series in result:
        point = _vector_point(series)
        if isinstance(point, QueryFailure):
            return point
        labels, value = point
        if value is None:
            continue
        key = SeriesKey(signal, labels_of(_kept(labels, keep)))
        if key in samples:
            message = f"two series share labels {dict(key.labels)}; keep the label that differs"
            return QueryFailure(NoData.AMBIGUOUS, message)
        samples[key] = Sample(key, value, now, source)
    if not samples:
        return QueryFailure(NoData.NOT_A_NUMBER, "every value was NaN or infinite")
    return tuple(samples.values())


def _vector_point(series: object) -> tuple[Mapping[str, object], float | None] | QueryFailure:
    """Labels and value of one vector element (value None when NaN or infinite)."""
    if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
        return QueryFailure(NoData.GARBAGE, "a series without labels")
    if "values" in series:
        return QueryFailure(NoData.REJECTED, "a range vector; wrap it, e.g. in avg_over_time")
    point = series.get("value")
    if not (isinstance(point, list) and len(point) == 2):
        return QueryFailure(NoData.GARBAGE, "a series without a value")
    return series["metric"], _number(point[1])


def _is_scalar(result: list[object]) -> bool:
    return len(result) == 2 and isinstance(result[0], int | float) and isinstance(result[1], str)


def _number(text: object) -> float | None:
    # Prometheus sends values as strings ("1.5", "NaN", "+Inf"); a string result is not a number.
    if not isinstance(text, str):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _kept(labels: Mapping[str, object], keep: Collection[str]) -> dict[str, str]:
    return {
        name: str(value)
        for name, value in labels.items()
        if name != "__name__" and (name in ALWAYS_KEPT or name in keep)
    }
