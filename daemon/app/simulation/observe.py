"""What the governor's sources would see of a virtual run: one :class:`TargetView` per tick.

The live governor scrapes vLLM's ``/metrics`` and ``/health`` (and HAProxy's stats socket when
there is a gate) and derives rates and quantiles over the ``[signals]`` window (60 s). Here the
same names come from the virtual run, on the same rules:

- **Gauges** (``running``, ``waiting``, ``kv_usage``, ``healthy``) are the engine's state now.
- **Rates** (``preemptions_per_s``, ``errors_per_s``, ``aborts_per_s``, ``rejections_per_s``,
  ``gen_tokens_per_s``, ``prompt_tokens_per_s``) are counter deltas over the window, from the
  scrapes :meth:`Observer.scrape` records (every second of virtual time).
- **Quantiles** (``ttft``, ``tpot``, ``request_tpot``, ``queue``, ``e2e``: p50/p95/p99) are
  nearest-rank over the requests that completed in the window, as vLLM measured them: the wait
  at the gate is taken out, since vLLM's histograms never see it. (vLLM's are bucket
  interpolations and ``tpot`` is its inter-token latency; per-request exact values are used
  here, for both ``tpot`` and ``request_tpot``.)
- **Gate** signals (``gate_cap``, ``gate_in_flight``, ``gate_queue``, ``gate_queue_time_s``,
  ``gate_refusals_per_s``, ``gate_admitted_per_s``) when the run has a gate: HAProxy stays up
  while vLLM restarts; ``gate_cap_share`` from the cap and ``max-num-seqs``, as the daemon's
  views add it.
- **No stale data.** While vLLM is not serving (draining, down) only ``healthy = 0`` is fresh.
  Once it is back, rates and quantiles use only what happened since (its counters and
  histograms started again from zero), and a rate needs two scrapes.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from daemon.policy.evaluate import TargetView
from daemon.policy.knob_signals import with_knob_signals
from simulator.engine import Phase
from simulator.report import percentile
from simulator.requests import Outcome, RejectReason
from simulator.virtual_time import VirtualRun

WINDOW_S = 60.0
# HAProxy's queue time is an average over its last 1024 requests.
GATE_QUEUE_SAMPLE = 1024
COUNTERS = (
    "preemptions",
    "gen_tokens",
    "prompt_tokens",
    "aborts",
    "rejections",
    "refusals",
    "admissions",
)
RATES = {
    "preemptions_per_s": "preemptions",
    "gen_tokens_per_s": "gen_tokens",
    "prompt_tokens_per_s": "prompt_tokens",
    "aborts_per_s": "aborts",
    "rejections_per_s": "rejections",
    "gate_refusals_per_s": "refusals",
    "gate_admitted_per_s": "admissions",
}
GATE_RATES = frozenset({"gate_refusals_per_s", "gate_admitted_per_s"})


@dataclass(frozen=True, slots=True)
class Scrape:
    """Monotonic counters at one instant (over every incarnation of the engine)."""

    at: float
    counts: tuple[float, ...]  # in the order of COUNTERS


@dataclass(frozen=True, slots=True)
class Latency:
    """One completed request, as vLLM measured it (gate wait taken out)."""

    finished_at: float
    ttft_s: float
    tpot_s: float | None
    queue_s: float
    e2e_s: float


class Observer:
    """The sources of one target, reading a virtual run.

    Args:
        run: The run to observe.
        target: The instance's name.
        window_s: Window of rates and quantiles.
    """

    def __init__(self, run: VirtualRun, target: str, window_s: float = WINDOW_S) -> None:
        self.run = run
        self.target = target
        self.window_s = window_s
        self.scrapes: list[Scrape] = []
        self.latencies: list[Latency] = []
        self._ends: list[float] = []  # finished_at of latencies, for bisect
        self._seen = 0  # records of run.finished already read
        self._gate_waits: list[float] = []
        self.serving_since: float | None = 0.0

    def scrape(self, now: float) -> None:
        """Record the counters and the requests finished since the last scrape."""
        run = self.run
        serving = run.engine.phase is Phase.SERVING
        if not serving:
            self.serving_since = None
        elif self.serving_since is None:
            self.serving_since = now
        totals = run.engine.lifetime_totals(now)
        refusals = run.gate.timed_out if run.gate is not None else 0
        admissions = run.gate.admitted if run.gate is not None else 0
        engine_rejections = totals.outcomes[Outcome.REJECTED.value]
        counts = (
            float(totals.preemptions),
            float(totals.generation_tokens),
            float(totals.prompt_tokens),
            float(totals.outcomes[Outcome.ABORTED.value]),
            float(engine_rejections),
            float(refusals),
            float(admissions),
        )
        self.scrapes.append(Scrape(now, counts))
        self._read_records()

    def _read_records(self) -> None:
        finished = self.run.finished
        waits = self.run.gate_waits
        for record in finished[self._seen :]:
            if record.reject_reason is RejectReason.QUEUE_TIMEOUT:
                self._gate_waits.append(record.e2e_s or 0.0)
                continue
            waited = waits.get(record.request_id, 0.0)
            if self.run.gate is not None:
                self._gate_waits.append(waited)
            if record.outcome is not Outcome.COMPLETED or record.ttft_s is None:
                continue
            latency = Latency(
                finished_at=record.finished_at,
                ttft_s=record.ttft_s - waited,
                tpot_s=record.tpot_s,
                queue_s=(record.queue_time_s or 0.0) - waited,
                e2e_s=(record.e2e_s or 0.0) - waited,
            )
            # Records come out in (nearly) time order; insort keeps the window exact.
            index = bisect.bisect_right(self._ends, latency.finished_at)
            self._ends.insert(index, latency.finished_at)
            self.latencies.insert(index, latency)
        self._seen = len(finished)
        del self._gate_waits[:-GATE_QUEUE_SAMPLE]

    def view(self, now: float, knobs: Mapping[str, float]) -> TargetView:
        """The target as the policies would see it now."""
        signals = with_knob_signals(self.signals(now), knobs)
        return TargetView(self.target, signals, dict(knobs))

    def signals(self, now: float) -> dict[str, Any]:
        """Every fresh signal now (see the module docstring)."""
        signals: dict[str, Any] = self._gate_signals(now)
        since = self.serving_since
        if since is None:
            signals["healthy"] = 0.0
            return signals
        snapshot = self.run.snapshot()
        signals |= {
            "healthy": 1.0,
            "running": float(snapshot.num_running),
            "waiting": float(snapshot.num_waiting),
            "kv_usage": snapshot.kv_usage,
        }
        start = max(now - self.window_s, since)
        signals |= self._rates(start, now, gate=False)
        signals |= self.quantiles(start, now)
        return signals

    def _gate_signals(self, now: float) -> dict[str, Any]:
        gate = self.run.gate
        if gate is None:
            return {}
        signals: dict[str, Any] = {
            "gate_cap": float(gate.cap),
            "gate_in_flight": float(gate.in_flight),
            "gate_queue": float(gate.queued),
        }
        if self._gate_waits:
            signals["gate_queue_time_s"] = sum(self._gate_waits) / len(self._gate_waits)
        rates = self._rates(now - self.window_s, now, gate=True)
        return signals | rates

    def _rates(self, start: float, end: float, *, gate: bool) -> dict[str, float]:
        """Counter rates over ``[start, end]`` from the scrapes inside it (two at least)."""
        first = self._scrape_at_or_after(start)
        last = self.scrapes[-1] if self.scrapes else None
        if first is None or last is None or last.at <= first.at or last.at > end + 1e-9:
            return {}
        span = last.at - first.at
        names = GATE_RATES if gate else set(RATES) - GATE_RATES
        rates = {
            name: (last.counts[COUNTERS.index(c)] - first.counts[COUNTERS.index(c)]) / span
            for name, c in RATES.items()
            if name in names
        }
        if not gate:
            rates["errors_per_s"] = 0.0  # the simulated engine never fails a request
        return rates

    def _scrape_at_or_after(self, at: float) -> Scrape | None:
        times = [s.at for s in self.scrapes[-int(self.window_s) - 5 :]]
        offset = len(self.scrapes) - len(times)
        index = bisect.bisect_left(times, at - 1e-9)
        return self.scrapes[offset + index] if offset + index < len(self.scrapes) else None

    def window(self, start: float, end: float) -> list[Latency]:
        """The completed requests that finished in ``[start, end)``."""
        low = bisect.bisect_left(self._ends, start)
        high = bisect.bisect_left(self._ends, end)
        return self.latencies[low:high]

    def quantiles(self, start: float, end: float) -> dict[str, float]:
        """p50/p95/p99 of TTFT, TPOT, queue and e2e over ``[start, end)``; {} without requests."""
        latencies = self.window(start, end)
        if not latencies:
            return {}
        series = {
            "ttft": [x.ttft_s for x in latencies],
            "tpot": [x.tpot_s for x in latencies if x.tpot_s is not None],
            "request_tpot": [x.tpot_s for x in latencies if x.tpot_s is not None],
            "queue": [x.queue_s for x in latencies],
            "e2e": [x.e2e_s for x in latencies],
        }
        values: dict[str, float] = {}
        for short, numbers in series.items():
            for p in (50, 95, 99):
                value = percentile(numbers, p / 100)
                if value is not None:
                    values[f"{short}_p{p}_s"] = value
        return values
