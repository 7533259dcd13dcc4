"""The few series a what-if reads, copied out of the signal store for the worker process.

Characterising a workload (reading some 40 series over ten minutes and fitting two
distributions) costs tens of milliseconds, too long for the daemon's event loop; copying the
points out costs a few. So the loop takes a :class:`SeriesSnapshot` of one instance's window
and the worker characterises it. The snapshot answers the two questions the characterisation
asks of a store (:class:`SeriesReader`), so the offline command can hand it the store itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from daemon.sources.samples import SeriesKey
from daemon.sources.store import Point

GATE_READ = (
    "haproxy_backend_http_5xx_total",
    "haproxy_http_5xx_total",
    "haproxy_queue_current",
    "haproxy_server_maxconn",
)
"""The gate's series (the HAProxy source's, tagged with the instance it fronts): its backend's
5xx, its server's 5xx, its queue and its cap (:mod:`~daemon.whatif.gate_demand`)."""

READ = (
    *GATE_READ,
    "vllm_request_success_total",
    "vllm_admission_rejections_total",
    "vllm_num_requests_running",
    "vllm_num_requests_waiting",
    "vllm_prompt_tokens_total",
    "vllm_generation_tokens_total",
    *(
        f"vllm_{histogram}{suffix}"
        for histogram in ("request_prompt_tokens", "request_generation_tokens")
        for suffix in ("_bucket", "_count", "_sum")
    ),
    "vllm_iteration_tokens_count",
    "vllm_iteration_tokens_sum",
)
"""The series the characterisation and the profile check read; the gate's are absent without
one."""


class SeriesReader(Protocol):
    """What the characterisation asks of a store (:class:`~daemon.sources.store.SignalStore`)."""

    def keys(self, name: str, **labels: str) -> list[SeriesKey]:
        """Series named ``name`` whose labels include ``labels``."""
        ...

    def points(self, key: SeriesKey, since: float = float("-inf")) -> list[Point]:
        """Points of ``key`` at or after ``since``, oldest first."""
        ...


@dataclass(frozen=True, slots=True)
class SeriesSnapshot:
    """Copies of some series' points: a read-only, picklable :class:`SeriesReader`."""

    series: dict[SeriesKey, list[Point]] = field(default_factory=dict)

    def keys(self, name: str, **labels: str) -> list[SeriesKey]:
        """Series named ``name`` whose labels include ``labels``, in a stable order."""
        wanted = set(labels.items())
        found = [key for key in self.series if key.name == name and wanted <= set(key.labels)]
        return sorted(found, key=lambda key: key.labels)

    def points(self, key: SeriesKey, since: float = float("-inf")) -> list[Point]:
        """Points of ``key`` at or after ``since``, oldest first."""
        return [point for point in self.series.get(key, ()) if point[0] >= since]


def snapshot(
    store: SeriesReader, instance: str, since: float, names: Iterable[str] = READ
) -> SeriesSnapshot:
    """The instance's aggregate series (no ``engine`` label) of ``names`` since ``since``."""
    return SeriesSnapshot(
        {
            key: store.points(key, since)
            for name in names
            for key in store.keys(name, instance=instance)
            if key.label("engine") is None
        }
    )
