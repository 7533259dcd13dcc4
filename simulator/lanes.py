"""The online and batch lanes of a run, accounted apart.

A request belongs to the **batch** lane when its ``priority`` is greater than 0 (vLLM serves
lower values first; online clients send none, which is 0), and to the **online** lane
otherwise. That is the marker the governor's batch lane uses: it sends its own requests at a
priority above every online one (1000 by default) where the server runs
``--scheduling-policy priority``. Under FCFS the priority changes nothing in the engine, but
it still marks the lane here, so that a run without priority scheduling is accounted the same
way.

Online traffic is judged by its SLO (:func:`simulator.report.meets_slo`: TTFT <= 2 s and TPOT
<= 100 ms, aborted and rejected requests are misses); batch traffic by the work it got done:
the output tokens of its completed requests. Batch requests never count in the online
figures, in either direction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any

from simulator.requests import FinishedRequest, Outcome
from simulator.slo import meets_slo, percentile


class Lane(StrEnum):
    """Which lane a request belongs to."""

    ONLINE = "online"
    BATCH = "batch"


def lane_of(priority: int) -> Lane:
    """The lane of a request of this ``priority``: batch above 0, online otherwise."""
    return Lane.BATCH if priority > 0 else Lane.ONLINE


def online_summary(records: Sequence[FinishedRequest]) -> dict[str, Any]:
    """SLO attainment and latency percentiles of online requests (None where there are none)."""
    completed = [r for r in records if r.outcome is Outcome.COMPLETED]
    ttfts = [r.ttft_s for r in completed if r.ttft_s is not None]
    tpots = [r.tpot_s for r in completed if r.tpot_s is not None]
    good = sum(1 for r in records if meets_slo(r))
    return {
        "requests": len(records),
        "completed": len(completed),
        "slo_attainment": good / len(records) if records else None,
        "ttft_p50_s": percentile(ttfts, 0.50),
        "ttft_p95_s": percentile(ttfts, 0.95),
        "tpot_p50_s": percentile(tpots, 0.50),
        "tpot_p95_s": percentile(tpots, 0.95),
        "output_tokens": sum(r.output_tokens for r in completed),
    }


def batch_summary(records: Sequence[FinishedRequest]) -> dict[str, Any]:
    """The work batch requests got done, and what they lost."""
    completed = [r for r in records if r.outcome is Outcome.COMPLETED]
    return {
        "requests": len(records),
        "completed": len(completed),
        "aborted": sum(1 for r in records if r.outcome is Outcome.ABORTED),
        "rejected": sum(1 for r in records if r.outcome is Outcome.REJECTED),
        "output_tokens": sum(r.output_tokens for r in completed),
        "prompt_tokens": sum(r.prompt_tokens for r in completed),
        "preemptions": sum(r.num_preemptions for r in records),
    }


def split(records: Iterable[FinishedRequest]) -> dict[Lane, list[FinishedRequest]]:
    """The records of each lane, in their order."""
    lanes: dict[Lane, list[FinishedRequest]] = {lane: [] for lane in Lane}
    for record in records:
        lanes[lane_of(record.priority)].append(record)
    return lanes


def lanes_report(records: Iterable[FinishedRequest]) -> dict[str, Any]:
    """Both lanes of a run: ``{"online": ..., "batch": ...}``."""
    lanes = split(records)
    return {
        Lane.ONLINE.value: online_summary(lanes[Lane.ONLINE]),
        Lane.BATCH.value: batch_summary(lanes[Lane.BATCH]),
    }


def lanes_by_period(records: Iterable[FinishedRequest], period_s: float) -> list[dict[str, Any]]:
    """Both lanes per period of ``period_s`` seconds (a virtual hour of a compressed day).

    An online request counts in the period it arrived in (its latency is the period's), a
    batch request's tokens in the period it completed in (that is when the work was done).
    """
    if not period_s > 0:
        msg = f"period_s must be positive, not {period_s}"
        raise ValueError(msg)
    online: dict[int, list[FinishedRequest]] = {}
    batch: dict[int, list[FinishedRequest]] = {}
    for record in records:
        if lane_of(record.priority) is Lane.ONLINE:
            online.setdefault(math.floor(record.arrived_at / period_s), []).append(record)
        else:
            batch.setdefault(math.floor(record.finished_at / period_s), []).append(record)
    count = max([*online, *batch], default=-1) + 1
    return [
        {
            "period": index,
            "start_s": index * period_s,
            Lane.ONLINE.value: online_summary(online.get(index, [])),
            Lane.BATCH.value: batch_summary(batch.get(index, [])),
        }
        for index in range(count)
    ]
