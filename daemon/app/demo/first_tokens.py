"""How many first tokens came within the TTFT SLO, from the server's own TTFT histogram.

The simulated server writes its exact SLO attainment (TTFT and TPOT, per request) only when
a process exits. To draw attainment over time and show it live, the demo reads vLLM's
``vllm:time_to_first_token_seconds`` histogram from ``/metrics`` twice a second and counts
the first tokens that came within the SLO, interpolating linearly inside the bucket that
holds the SLO (vLLM's buckets jump from 1 s to 2.5 s), as Prometheus's
``histogram_quantile`` does. In the demo's story TPOT stays far inside its SLO, so TTFT is
what decides; requests refused while the server drains or is down have no first token and
are not in this share (the summary counts them as misses). The histogram restarts at zero
with each server process, so windows never span a restart.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from daemon.app.demo.narration import clock

_BUCKET = re.compile(
    r"^vllm:time_to_first_token_seconds_bucket\{([^}]*)\}\s+(\S+)\s*$", re.MULTILINE
)
_LE = re.compile(r'(?:^|,)\s*le="([^"]+)"')
# Windows of the live share and the plot: long enough to hold a few dozen requests at the
# demo's 13 requests/s, short enough to show a burst.
WINDOW_S = 30.0


@dataclass(frozen=True, slots=True)
class FirstTokens:
    """One process's first tokens so far: all of them, and those within the SLO.

    Attributes:
        process: The serving process (its start time as ``/metrics`` states it).
        total: First tokens observed since the process started.
        within: Those within the SLO (interpolated inside the SLO's bucket).
    """

    process: str
    total: float
    within: float


def read_first_tokens(page: str, process: str, slo_s: float) -> FirstTokens | None:
    """The TTFT histogram of a ``/metrics`` page, counted against ``slo_s``; None if absent."""
    buckets: dict[float, float] = {}
    for match in _BUCKET.finditer(page):
        le = _LE.search(match.group(1))
        if le is None:
            continue
        bound = math.inf if le.group(1) == "+Inf" else float(le.group(1))
        # A data-parallel server has one series per engine: they add up.
        buckets[bound] = buckets.get(bound, 0.0) + float(match.group(2))
    if math.inf not in buckets:
        return None
    return FirstTokens(process, buckets[math.inf], _within(sorted(buckets.items()), slo_s))


def _within(cumulative: Sequence[tuple[float, float]], slo_s: float) -> float:
    """Observations <= ``slo_s`` in a cumulative histogram, linear inside its bucket."""
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in cumulative:
        if bound == slo_s:
            return count
        if bound > slo_s:
            if math.isinf(bound):
                return lower_count  # past the last finite bound: nothing to interpolate on
            share = (slo_s - lower_bound) / (bound - lower_bound)
            return lower_count + (count - lower_count) * share
        lower_bound, lower_count = bound, count
    return lower_count


def share_within(
    series: Sequence[tuple[float, FirstTokens | None]], start: float, end: float
) -> float | None:
    """Share of the first tokens of ``(start, end]`` within the SLO; None if there were none.

    ``series`` is ``(t, counts)`` in time order. Within one process the counts grow; a new
    process starts from zero, so each process's part of the window is its last count minus
    its count before the window (zero if it started inside it).
    """
    before: dict[str, FirstTokens] = {}
    last: dict[str, FirstTokens] = {}
    for t, counts in series:
        if counts is None or t > end:
            continue
        if t <= start:
            before[counts.process] = counts
        else:
            last[counts.process] = counts
    total = within = 0.0
    for process, counts in last.items():
        base = before.get(process)
        total += counts.total - (base.total if base else 0.0)
        within += counts.within - (base.within if base else 0.0)
    return within / total if total > 0 else None


@dataclass(frozen=True, slots=True)
class ProcessShare:
    """One serving process's first tokens, as last seen.

    Attributes:
        knob: The tuned option it served with.
        from_t: When it was first seen serving (seconds since the workload's time 0).
        to_t: When it was last seen.
        counts: Its first tokens so far.
    """

    knob: int | None
    from_t: float
    to_t: float
    counts: FirstTokens

    @property
    def share(self) -> float | None:
        """Share of its first tokens within the SLO; None before the first."""
        return self.counts.within / self.counts.total if self.counts.total > 0 else None


def by_process(
    series: Sequence[tuple[float, int | None, FirstTokens | None]],
) -> list[ProcessShare]:
    """Each serving process of ``(t, knob, counts)``, in the order they served."""
    shares: dict[str, ProcessShare] = {}
    for t, knob, counts in series:
        if counts is None:
            continue
        seen = shares.get(counts.process)
        start = t if seen is None else seen.from_t
        shares[counts.process] = ProcessShare(knob, start, t, counts)
    return list(shares.values())


def attainment_lines(
    series: Sequence[tuple[float, int | None, FirstTokens | None]],
    t: float,
    *,
    slo_s: float,
    option: str,
) -> list[str]:
    """What the live view says of the first tokens within the SLO: now, and per process."""
    lines = []
    now = share_within([(at, counts) for at, _, counts in series], t - WINDOW_S, t)
    if now is not None:
        lines.append(f"first tokens within {slo_s:g} s over the last {WINDOW_S:.0f} s: {now:.0%}")
    processes = by_process(series)
    for index, process in enumerate(processes):
        if process.share is None:
            continue
        if index < len(processes) - 1:
            when = f"until {clock(process.to_t)}"
        else:
            # The first process is ready a little before the workload's time 0.
            when = "since the start" if process.from_t <= 0 else f"since {clock(process.from_t)}"
        lines.append(
            f"with {option} {process.knob} ({when}): {process.share:.0%} of "
            f"{process.counts.total:,.0f} first tokens within {slo_s:g} s"
        )
    return lines
