"""The HAProxy source: the admission gate in front of vLLM, as HAProxy's stats socket shows it.

One ``show stat`` per poll gives every configured server and its backend at the same instant.
Server series carry the labels ``backend`` and ``server``, plus ``instance`` when the server is
mapped to a vLLM instance of the configuration; backend series carry ``backend`` (and that
``instance`` when every watched server of the backend maps to the same one).

Per server:

- ``haproxy_queue_current``: requests waiting to reach this server: its own queue plus its
  backend's. HAProxy queues a request on a server only when it must go to that server
  (persistence); the others wait in the backend's queue, which any of its servers may take.
  In front of one vLLM instance (the reference config) both wait for that instance; with
  several servers per backend, the shared queue counts for each of them.
- ``haproxy_sessions_current`` (``scur``), ``haproxy_sessions_max`` (``smax``),
  ``haproxy_server_maxconn`` (``slim``: the admission cap; absent when the server has none),
  ``haproxy_queue_limit`` (``qlimit``: its ``maxqueue``; absent when none),
  ``haproxy_sessions_total`` (``stot``), ``haproxy_session_rate`` (``rate``, per second);
- ``haproxy_queue_time_seconds``, ``haproxy_connect_time_seconds``,
  ``haproxy_response_time_seconds`` (to the response headers: about TTFT for a streamed
  completion, the whole answer otherwise), ``haproxy_total_time_seconds``: HAProxy's averages
  over the last 1024 requests, so they trail a change; the queue depth is the leading signal;
- counters ``haproxy_http_2xx_total``, ``haproxy_http_5xx_total`` (answered by vLLM),
  ``haproxy_connection_errors_total`` (``econ``), ``haproxy_response_errors_total``
  (``eresp``), ``haproxy_retries_total`` (``wretr``);
- ``haproxy_server_up``: 1 while HAProxy sends it traffic (``UP``, ``no check``), else 0.

Per backend: ``haproxy_backend_queue_current``, ``haproxy_backend_queue_max``,
``haproxy_backend_sessions_current``, ``haproxy_backend_http_5xx_total`` and
``haproxy_backend_connection_errors_total``. The backend's 5xx include HAProxy's own 503s (a
request that timed out in the queue, or found no server up), which no server row counts: they
are the gate's refusals, misses for the SLO.

An empty field is absent (unknown, or no limit), never zero. HAProxy down is
:class:`SourceUnavailable`, so the series go stale; a configured server HAProxy does not know
is left out and logged once (the poll fails only when none is known).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Self

from daemon.core.errors import CommandRefused
from daemon.sources.haproxy_runtime import HaproxyRuntime, ServerRef, StatsAddress
from daemon.sources.haproxy_stats import BACKEND_ROW, StatRow
from daemon.sources.polling import PollResult
from daemon.sources.samples import Sample, SeriesKey, labels_of

log = logging.getLogger(__name__)

_MS = 0.001
# (canonical name, show stat field, scale to the canonical unit)
SERVER_FIELDS: tuple[tuple[str, str, float], ...] = (
    ("haproxy_sessions_current", "scur", 1.0),
    ("haproxy_sessions_max", "smax", 1.0),
    ("haproxy_server_maxconn", "slim", 1.0),
    ("haproxy_queue_limit", "qlimit", 1.0),
    ("haproxy_sessions_total", "stot", 1.0),
    ("haproxy_session_rate", "rate", 1.0),
    ("haproxy_queue_time_seconds", "qtime", _MS),
    ("haproxy_connect_time_seconds", "ctime", _MS),
    ("haproxy_response_time_seconds", "rtime", _MS),
    ("haproxy_total_time_seconds", "ttime", _MS),
    ("haproxy_http_2xx_total", "hrsp_2xx", 1.0),
    ("haproxy_http_5xx_total", "hrsp_5xx", 1.0),
    ("haproxy_connection_errors_total", "econ", 1.0),
    ("haproxy_response_errors_total", "eresp", 1.0),
    ("haproxy_retries_total", "wretr", 1.0),
)
BACKEND_FIELDS: tuple[tuple[str, str, float], ...] = (
    ("haproxy_backend_queue_current", "qcur", 1.0),
    ("haproxy_backend_queue_max", "qmax", 1.0),
    ("haproxy_backend_sessions_current", "scur", 1.0),
    ("haproxy_backend_http_5xx_total", "hrsp_5xx", 1.0),
    ("haproxy_backend_connection_errors_total", "econ", 1.0),
)


class HaproxySource:
    """Polls one HAProxy's stats socket for the servers in front of vLLM.

    Args:
        address: The stats socket (a Unix socket path, or ``(host, port)``).
        servers: The servers to watch, each mapped to the vLLM instance it fronts (or None).
        interval_s: Seconds between polls.
        timeout_s: Bound on one poll.
        name: The source's name (``haproxy``; another when one host runs several).
    """

    def __init__(
        self,
        address: StatsAddress,
        servers: Mapping[ServerRef, str | None],
        interval_s: float,
        timeout_s: float,
        *,
        name: str = "haproxy",
    ) -> None:
        if not servers:
            message = "an HAProxy source needs at least one server to watch"
            raise ValueError(message)
        self.name = name
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.servers = dict(servers)
        self.runtime = HaproxyRuntime(address, timeout_s)
        self._backend_instances = _backend_instances(self.servers)
        self._missing: set[ServerRef] = set()

    async def __aenter__(self) -> Self:
        """Nothing to open: every poll is one connection."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Nothing to close."""

    async def poll(self, now: float) -> PollResult:
        """Read every watched server and its backend from one ``show stat``."""
        rows = {(row.proxy, row.name): row for row in await self.runtime.show_stat()}
        samples: list[Sample] = []
        missing = set()
        for ref, instance in self.servers.items():
            row = rows.get((ref.backend, ref.server))
            if row is None:
                missing.add(ref)
                continue
            backend = rows.get((ref.backend, BACKEND_ROW))
            samples.extend(self._server_samples(ref, instance, row, backend, now))
        for backend_name, instance in self._backend_instances.items():
            backend = rows.get((backend_name, BACKEND_ROW))
            if backend is not None:
                labels = {"backend": backend_name}
                if instance is not None:
                    labels["instance"] = instance
                samples.extend(self._samples(BACKEND_FIELDS, backend, labels, now))
        self._log_changes(missing)
        if len(missing) == len(self.servers):
            names = ", ".join(sorted(str(ref) for ref in missing))
            message = f"haproxy at {self.runtime} has none of the watched servers: {names}"
            raise CommandRefused(message, detail="unknown-server")
        return PollResult(tuple(samples), "some-servers-unknown" if missing else "")

    def _server_samples(
        self,
        ref: ServerRef,
        instance: str | None,
        row: StatRow,
        backend: StatRow | None,
        now: float,
    ) -> list[Sample]:
        labels = {"backend": ref.backend, "server": ref.server}
        if instance is not None:
            labels["instance"] = instance
        samples = self._samples(SERVER_FIELDS, row, labels, now)
        key_labels = labels_of(labels)
        queued = row.number("qcur")
        if queued is not None:
            shared = backend.number("qcur") if backend is not None else None
            total = queued + (shared or 0.0)
            samples.append(
                Sample(SeriesKey("haproxy_queue_current", key_labels), total, now, self.name)
            )
        status = row.text("status")
        if status:
            up = 1.0 if status.startswith("UP") or status == "no check" else 0.0
            samples.append(Sample(SeriesKey("haproxy_server_up", key_labels), up, now, self.name))
        return samples

    def _samples(
        self,
        fields: tuple[tuple[str, str, float], ...],
        row: StatRow,
        labels: dict[str, str],
        now: float,
    ) -> list[Sample]:
        key_labels = labels_of(labels)
        samples = []
        for name, field, scale in fields:
            value = row.number(field)
            if value is not None:
                samples.append(Sample(SeriesKey(name, key_labels), value * scale, now, self.name))
        return samples

    def _log_changes(self, missing: set[ServerRef]) -> None:
        for ref in missing - self._missing:
            log.warning("haproxy has no such server", extra={"server": str(ref)})
        for ref in self._missing - missing:
            log.info("haproxy knows the server again", extra={"server": str(ref)})
        self._missing = missing


def _backend_instances(servers: Mapping[ServerRef, str | None]) -> dict[str, str | None]:
    """Each watched backend and the one instance all its watched servers front, if there is one."""
    instances: dict[str, set[str | None]] = {}
    for ref, instance in servers.items():
        instances.setdefault(ref.backend, set()).add(instance)
    return {
        backend: next(iter(names)) if len(names) == 1 else None
        for backend, names in instances.items()
    }
