"""A Prometheus range, turned into recorded ticks: what the policies would have seen then.

One range query (``/api/v1/query_range``, through prometheus-api-client's
``custom_query_range``) per signal: the catalogue's signals of each target
(:mod:`~daemon.app.backtest.promql`), and the configured ``[sources.prometheus] queries``,
which the daemon's Prometheus source runs as instant queries. Each step of the range becomes
one tick: its points become signal rows exactly as the daemon's sources make them (the
Prometheus source's own :func:`~daemon.sources.prometheus_results.to_samples`, so NaN is no
data and kept labels are the same), and the rows become views through
:func:`~daemon.policy.views.target_views`, as in the evaluator.

Knob values are not in Prometheus: they are given (``--knob``) or unknown.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import requests
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from daemon.app.backtest.errors import BacktestError
from daemon.app.backtest.promql import catalogue_queries
from daemon.app.backtest.recording import RecordedTick
from daemon.policy.views import target_views
from daemon.sources.declarations import SignalRegistry
from daemon.sources.prometheus_results import QueryFailure, to_samples
from daemon.sources.registry import BUILTIN
from daemon.sources.view import OK, SignalRow

SOURCE = "prometheus"
# Prometheus refuses a range of more than 11,000 points per series.
MAX_POINTS = 11_000
QUERY_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class RangeRequest:
    """What to import.

    Attributes:
        url: Prometheus' base URL.
        start: First step, timezone-aware.
        end: Last step (included when on the grid).
        step_s: Seconds between steps: the evaluation interval to replay.
        selectors: Per target, the label matchers of its series (``instance="host:port"``).
        window_s: Window of rates and quantiles (the daemon's ``signals.window_s``).
        queries: Further signals by name (``[sources.prometheus] queries``), for every target.
        keep_labels: Labels kept on those signals' series (``[sources.prometheus]``).
        knobs: Knob values per target over the whole range, when known.
    """

    url: str
    start: datetime
    end: datetime
    step_s: float
    selectors: Mapping[str, str]
    window_s: float
    queries: Mapping[str, str]
    keep_labels: Collection[str] = ()
    knobs: Mapping[str, Mapping[str, float]] | None = None
    signals: SignalRegistry = BUILTIN


def import_range(request: RangeRequest) -> list[RecordedTick]:
    """One tick per step of the range.

    Raises:
        BacktestError: Prometheus cannot be reached, refuses a query, or the range is unusable.
    """
    steps = _steps(request)
    rows: list[list[SignalRow]] = [[] for _ in steps]
    with _client(request.url) as client:
        for target, selector in request.selectors.items():
            for name, query in catalogue_queries(selector, request.window_s).items():
                for index, labels, value in _points(client, request, query, steps):
                    if not labels:  # the reduction leaves none; anything else is not ours
                        rows[index].append(SignalRow(name, target, {}, value, SOURCE, 0.0, OK))
        for name, query in request.queries.items():
            for index, labels, value in _points(client, request, query, steps):
                rows[index].append(SignalRow(name, None, labels, value, SOURCE, 0.0, OK))
    targets = list(request.selectors)
    ticks = []
    for index, moment in enumerate(steps):
        views = target_views(rows[index], targets, request.knobs, request.signals)
        ticks.append(RecordedTick(moment, index * request.step_s, views))
    return ticks


def _steps(request: RangeRequest) -> list[datetime]:
    if request.start.tzinfo is None or request.end.tzinfo is None:
        message = "--start and --end need a time zone (e.g. 2026-11-29T10:00:00Z)"
        raise BacktestError(message)
    if not (math.isfinite(request.step_s) and request.step_s > 0):
        message = f"--step must be a positive duration, not {request.step_s:g} s"
        raise BacktestError(message)
    # Prometheus' client sends whole seconds; the steps fall on that grid.
    start = datetime.fromtimestamp(round(request.start.timestamp()), UTC)
    span = round(request.end.timestamp()) - start.timestamp()
    if span < 0:
        message = f"--end ({request.end.isoformat()}) is before --start ({start.isoformat()})"
        raise BacktestError(message)
    count = int(span // request.step_s) + 1
    if count > MAX_POINTS:
        message = (
            f"the range holds {count} steps of {request.step_s:g} s; Prometheus answers at most "
            f"{MAX_POINTS}: import it in parts, or with a longer --step"
        )
        raise BacktestError(message)
    return [start + timedelta(seconds=index * request.step_s) for index in range(count)]


@contextmanager
def _client(url: str) -> Iterator[PrometheusConnect]:
    """prometheus-api-client with no retries and no proxies from the environment."""
    if not url.startswith(("http://", "https://")):
        message = f"--prometheus must be an http:// or https:// URL, not {url!r}"
        raise BacktestError(message)
    session = requests.Session()
    session.trust_env = False
    client = PrometheusConnect(
        url.rstrip("/"), disable_ssl=False, retry=Retry(total=0), session=session
    )
    try:
        yield client
    finally:
        client.close()


def _points(
    client: PrometheusConnect, request: RangeRequest, query: str, steps: list[datetime]
) -> list[tuple[int, dict[str, str], float]]:
    """(step index, kept labels, value) of every finite point ``query`` returns."""
    try:
        result = client.custom_query_range(
            query,
            start_time=steps[0],
            end_time=steps[-1],
            step=f"{request.step_s:g}s",
            params={"timeout": f"{QUERY_TIMEOUT_S:g}s"},
            timeout=QUERY_TIMEOUT_S,  # type: ignore[arg-type]
        )
    except PrometheusApiClientException as exc:
        message = f"{request.url} refused the range query {query!r}: {exc}"
        raise BacktestError(message) from exc
    except requests.exceptions.RequestException as exc:
        message = f"cannot query {request.url}: {type(exc).__name__}: {exc}"
        raise BacktestError(message) from exc
    start = steps[0].timestamp()
    points: list[tuple[int, dict[str, str], float]] = []
    for series in result if isinstance(result, list) else []:
        for index, sample in _instants(series, start, request.step_s, len(steps)):
            for point in _samples(sample, request.keep_labels):
                points.append((index, *point))
    return points


def _instants(
    series: Any, start: float, step_s: float, count: int
) -> list[tuple[int, dict[str, Any]]]:
    """A matrix series as one instant-vector element per step it has a value at."""
    if not isinstance(series, dict) or not isinstance(series.get("values"), list):
        return []
    instants = []
    for moment, value in series["values"]:
        index = round((float(moment) - start) / step_s)
        if 0 <= index < count:
            instants.append((index, {"metric": series.get("metric", {}), "value": [moment, value]}))
    return instants


def _samples(element: dict[str, Any], keep: Collection[str]) -> list[tuple[dict[str, str], float]]:
    # The Prometheus source's own reading: NaN and Inf are no data, labels kept as it keeps them.
    samples = to_samples("point", [element], keep, 0.0, SOURCE)
    if isinstance(samples, QueryFailure):
        return []
    return [(dict(sample.key.labels), sample.value) for sample in samples]
