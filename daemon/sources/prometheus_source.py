"""The Prometheus source: one PromQL instant query per signal, on the polling runner.

Each query is a GET of ``/api/v1/query`` with requests, which is synchronous, so it runs in a
thread of its own, one call of that query at a time
(:class:`~daemon.sources.blocking_calls.OneCallAtATime`), never in asyncio's shared pool:
requests' timeout bounds each read, not the answer, so a server that trickles its answer never
times out, and every poll the runner gave up on kept a thread of that pool until it was full
and nothing else that needed it (a host name's resolution, the stop) could run (issue 15). Now
such a query is "not returned yet" at the next poll, its signal has no data, and it costs one
thread however long it hangs. An answer is read as a stream, at most :data:`MAX_ANSWER_BYTES`
of it: read whole, an answer that never ends took the daemon's memory at 200 MB a second.

A query that fails or comes back empty leaves its signal without a sample this time ("no
data", never a zero) and is logged once per change of that signal's state; the others still
count. Only when no query gets an answer at all is the source down: :class:`SourceUnavailable`
when Prometheus cannot be reached, :class:`~daemon.core.errors.MetricsParseError` when what
answers is not Prometheus. Errors are translated here, at the boundary.

Retries are switched off (the runner retries, with backoff), and so is the use of proxies from
the environment, as for every other source.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Self

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from daemon.core.errors import MetricsParseError, SourceUnavailable
from daemon.sources.blocking_calls import OneCallAtATime
from daemon.sources.polling import PollResult
from daemon.sources.prometheus_results import NoData, QueryFailure, to_samples
from daemon.sources.samples import Sample

log = logging.getLogger(__name__)

# Each query may use this share of the poll's timeout, so that one slow query becomes "no
# data" for its own signal before the runner gives up on the whole poll.
QUERY_SHARE_OF_TIMEOUT = 0.8
# Queries in flight at once: enough to overlap round trips, few threads at a time.
MAX_PARALLEL_QUERIES = 4
# An instant query's answer for the governor is a few hundred bytes a series; one this large is
# not an answer it can use, and holding it would cost the daemon its memory budget.
MAX_ANSWER_BYTES = 4 << 20
_CHUNK_BYTES = 64 << 10

Outcome = tuple[Sample, ...] | QueryFailure


class PrometheusSource:
    """Signals computed by PromQL on a Prometheus server."""

    name = "prometheus"

    def __init__(
        self,
        url: str,
        queries: Mapping[str, str],
        *,
        interval_s: float = 15.0,
        timeout_s: float = 5.0,
        keep_labels: Iterable[str] = (),
        ca_file: Path | None = None,
    ) -> None:
        """Prepare the source; nothing connects before the first poll.

        Args:
            url: Base URL of the Prometheus server (``http://prometheus:9090``).
            queries: Signal name to PromQL instant query.
            interval_s: Seconds between polls.
            timeout_s: Limit on one poll, all queries together.
            keep_labels: Labels kept on vector series besides ``instance`` and ``job``.
            ca_file: CA bundle for an https URL with a private CA; TLS is always verified.
        """
        if not url.startswith(("http://", "https://")):
            message = f"the Prometheus URL must be http:// or https://, not {url!r}"
            raise ValueError(message)
        if not queries:
            message = "the Prometheus source needs at least one query"
            raise ValueError(message)
        self.url = url.rstrip("/")
        self.queries = dict(queries)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.keep_labels = frozenset(keep_labels)
        self._ca_file = ca_file
        self._session: requests.Session | None = None
        self._parallel = asyncio.Semaphore(MAX_PARALLEL_QUERIES)
        self._states: dict[str, NoData | None] = dict.fromkeys(self.queries)
        self._calls = {name: OneCallAtATime(f"the query {name!r}") for name in self.queries}

    async def __aenter__(self) -> Self:
        """Build the HTTP client (no I/O yet)."""
        session = requests.Session()
        session.trust_env = False  # no proxies or netrc from the environment
        session.verify = str(self._ca_file) if self._ca_file else True
        adapter = HTTPAdapter(max_retries=Retry(total=0))  # the runner retries, with backoff
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        self._session = session
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the HTTP client's connections."""
        if self._session is not None:
            self._session.close()
            self._session = None

    async def poll(self, now: float) -> PollResult:
        """Run every query once; raise when none got an answer."""
        names = list(self.queries)
        outcomes = await asyncio.gather(*(self._query(name, now) for name in names))
        failures = [outcome for outcome in outcomes if isinstance(outcome, QueryFailure)]
        if len(failures) == len(outcomes):
            # Nothing answered: the runner logs the source down once, not each signal.
            _raise_if_down(self.url, failures)
        samples: list[Sample] = []
        for name, outcome in zip(names, outcomes, strict=True):
            self._note(name, outcome)
            if not isinstance(outcome, QueryFailure):
                samples.extend(outcome)
        partial = any(failure.reason is not NoData.EMPTY for failure in failures)
        return PollResult(tuple(samples), detail="partial" if partial else "")

    async def _query(self, name: str, now: float) -> Outcome:
        async with self._parallel:
            try:
                return await self._calls[name].run(lambda: self._query_blocking(name, now))
            except SourceUnavailable as exc:  # the last call of this query still hangs
                return QueryFailure(NoData.UNREACHABLE, str(exc))

    def _query_blocking(self, name: str, now: float) -> Outcome:
        session = self._session
        if session is None:
            message = "the Prometheus source is used outside its async with block"
            raise RuntimeError(message)
        timeout = self.timeout_s * QUERY_SHARE_OF_TIMEOUT
        try:
            # The query timeout goes to Prometheus too, so that it stops evaluating in time.
            params = {"query": self.queries[name], "timeout": f"{timeout:g}"}
            with session.get(
                f"{self.url}/api/v1/query", params=params, timeout=timeout, stream=True
            ) as response:
                status, body = response.status_code, _bounded_body(response)
        except requests.exceptions.RequestException as exc:
            return QueryFailure(NoData.UNREACHABLE, _short(f"{type(exc).__name__}: {exc}"))
        if body is None:
            message = f"an answer larger than {MAX_ANSWER_BYTES >> 20} MiB, not read further"
            return QueryFailure(NoData.GARBAGE, message)
        if status != 200:
            return _http_failure(status, body)
        try:
            result = json.loads(body)["data"]["result"]
        except ValueError as exc:  # covers UnicodeDecodeError and json.JSONDecodeError
            return QueryFailure(NoData.GARBAGE, _short(f"not JSON: {exc}"))
        except (KeyError, TypeError) as exc:  # JSON, but without data.result
            return QueryFailure(NoData.GARBAGE, _short(f"JSON without data.result ({exc!r})"))
        return to_samples(name, result, self.keep_labels, now, self.name)

    def _note(self, name: str, outcome: Outcome) -> None:
        """Log a signal's change of state (ok, or which kind of no data), never a repeat."""
        new = outcome.reason if isinstance(outcome, QueryFailure) else None
        old = self._states[name]
        self._states[name] = new
        if new is old:
            return
        extra = {"source": self.name, "signal": name}
        if new is None:
            log.info("prometheus signal has data again", extra=extra)
        elif new in {NoData.EMPTY, NoData.NOT_A_NUMBER}:
            log.info("prometheus signal has no data", extra={**extra, "reason": new.value})
        else:
            assert isinstance(outcome, QueryFailure)
            log.warning(
                "prometheus query failed",
                extra={**extra, "reason": new.value, "error": outcome.message},
            )


def _raise_if_down(url: str, failures: list[QueryFailure]) -> None:
    """Raise when every query failed without Prometheus answering it."""
    reasons = {failure.reason for failure in failures}
    if NoData.UNREACHABLE in reasons:
        first = next(f for f in failures if f.reason is NoData.UNREACHABLE)
        message = f"{url}: {first.message}"
        raise SourceUnavailable(message, detail="unreachable")
    if reasons == {NoData.GARBAGE}:
        message = f"{url} does not answer like Prometheus: {failures[0].message}"
        raise MetricsParseError(message, detail="garbage")


def _bounded_body(response: requests.Response) -> bytes | None:
    """The answer's body, or None once it passes :data:`MAX_ANSWER_BYTES` (the rest unread)."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(_CHUNK_BYTES):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _http_failure(status: int, body: bytes) -> QueryFailure:
    text = f"HTTP Status Code {status} ({body[:200]!r})"
    # 4xx: Prometheus answered and refused this query (bad PromQL, 422 execution error);
    # 5xx: the server (or a proxy in front of it) is not able to answer at all.
    if 400 <= status < 500:
        return QueryFailure(NoData.REJECTED, _short(text))
    return QueryFailure(NoData.UNREACHABLE, _short(text))


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
