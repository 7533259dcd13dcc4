"""The service-level objectives every report of the simulator judges requests by.

Per request (docs/sources.md#slos): a request meets them when it completed with TTFT <= 2 s
and TPOT <= 100 ms (a one-token output has no TPOT and is judged on TTFT alone). Aborted and
rejected requests are misses, so dropping requests never looks like a win.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from simulator.requests import FinishedRequest, Outcome

TTFT_SLO_S = 2.0
TPOT_SLO_S = 0.100


def meets_slo(record: FinishedRequest) -> bool:
    """Whether one request met both objectives."""
    if record.outcome is not Outcome.COMPLETED or record.ttft_s is None:
        return False
    return record.ttft_s <= TTFT_SLO_S and (record.tpot_s is None or record.tpot_s <= TPOT_SLO_S)


def percentile(values: Sequence[float], share: float) -> float | None:
    """Nearest-rank percentile (``share`` in 0-1) of ``values``; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]
