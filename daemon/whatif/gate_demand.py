"""What an admission gate in front of the instance refused and queued, per scrape interval.

Behind a gate (HAProxy, ``[vllm.gate]``) vLLM counts only the requests the gate let in; the
others waited at the gate or got its 503. The HAProxy source stores, per instance:

* ``haproxy_backend_http_5xx_total``: the backend's 5xx, which include HAProxy's own 503s
  (a request that timed out in the queue, or found no server up) and the 5xx its servers
  answered; ``haproxy_http_5xx_total``: the latter alone, per server. The gate's refusals are
  the backend's rise less its servers' (vLLM's own errors are already among its finished
  requests);
* ``haproxy_queue_current``: requests waiting at the gate now;
* ``haproxy_server_maxconn``: the cap.

The gate is polled on its own clock, not at vLLM's scrapes: each series is read at a vLLM
scrape as its latest point at or before it (what the gate said then), and the intervals are
vLLM's, so the counts add up with vLLM's own arrivals interval by interval.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from daemon.sources.derivations import is_reset
from daemon.sources.domains import Implausible
from daemon.whatif.series_snapshot import GATE_READ, SeriesReader

BACKEND_5XX, SERVER_5XX, QUEUED, CAP = GATE_READ


@dataclass(frozen=True, slots=True)
class GateCounts:
    """The gate's share of the arrivals, per interval between consecutive vLLM scrapes.

    Attributes:
        refused: The gate's 503s in each interval.
        queued: Growth of its queue in each interval (negative when it shrank).
        cap: The cap at the last scrape, or None when the gate has none.
    """

    refused: tuple[float, ...]
    queued: tuple[float, ...]
    cap: int | None


def gate_counts(store: SeriesReader, instance: str, stamps: Sequence[float]) -> GateCounts | None:
    """The gate's refusals and queue growth between ``stamps``; None without gate data.

    Raises:
        Implausible: a counter fell without resetting.
    """
    backend = _stepped(store, BACKEND_5XX, instance, stamps)
    queued = _stepped(store, QUEUED, instance, stamps)
    if backend is None or queued is None:
        return None
    server = _stepped(store, SERVER_5XX, instance, stamps)
    refused = []
    for index, (before, after) in enumerate(itertools.pairwise(backend)):
        answered = 0.0 if server is None else counter_rise(server[index], server[index + 1])
        refused.append(max(counter_rise(before, after) - answered, 0.0))
    cap = _stepped(store, CAP, instance, stamps[-1:])
    return GateCounts(
        refused=tuple(refused),
        queued=tuple(after - before for before, after in itertools.pairwise(queued)),
        cap=None if cap is None else round(cap[0]),
    )


def counter_rise(before: float, after: float) -> float:
    """How much a counter rose between two readings; a reset counts from zero.

    Raises:
        Implausible: it fell without resetting.
    """
    if after >= before:
        return after - before
    if is_reset(before, after):
        return after
    message = f"a counter fell from {before:g} to {after:g} without resetting"
    raise Implausible(message)


def _stepped(
    store: SeriesReader, name: str, instance: str, stamps: Sequence[float]
) -> list[float] | None:
    """The sum over ``name``'s series of each one's latest value at or before every stamp.

    A stamp before a series' first point reads that first point (the gate's first poll of the
    window may come a moment after vLLM's first scrape). None when the instance has no such
    series or one has no point up to the last stamp, or a value is not finite.
    """
    keys = [key for key in store.keys(name, instance=instance) if key.label("engine") is None]
    if not keys:
        return None
    totals = [0.0] * len(stamps)
    for key in keys:
        points = [point for point in store.points(key) if point[0] <= stamps[-1]]
        if not points:
            return None
        times = [at for at, _ in points]
        for index, stamp in enumerate(stamps):
            value = points[max(bisect.bisect_right(times, stamp) - 1, 0)][1]
            if not math.isfinite(value):
                return None
            totals[index] += value
    return totals
