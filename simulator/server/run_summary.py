"""``sim serve --summary PATH``: what one server process did, appended as a JSON line on exit.

A restart is a new process whose counters start at zero (as vLLM's do), so a run that spans
restarts is told by the lines of every process together, in the order they ran. Each line
counts the requests that ended in this process by outcome, those that met the SLO
(:func:`simulator.report.meets_slo`: the same rule as ``sim run``'s report) and their output
tokens, the preemptions, the requests and those that met the SLO per second of arrival
(``by_arrival_second``: ``[second, requests, met]`` rows, seconds of the process's simulated
clock, which starts when it becomes ready, so that a reader can count them per phase of the
workload), the two lanes apart (``lanes``: online requests and those that met
the SLO; batch requests, those completed and their output tokens; :mod:`simulator.lanes`
says which is which), and which slice of the ``--load`` workload this process dealt with:
arrivals ``[first, next)`` in workload order, so that the arrivals no process dealt with
(they fell while the server was down) can be counted by whoever reads the lines, and, with
``--gate-socket``, what the gate in front of the load did (``gate``: its cap at the end, the
requests that waited there and their waits, those it refused with a 503, and both per second
of arrival, :mod:`simulator.server.gated_load`); the refused are rejections, SLO misses, in
the counts above. A process
stopped while it was still loading writes a line too, with ``ready_at`` null and no requests.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.lanes import Lane, lane_of
from simulator.requests import FinishedRequest, Outcome
from simulator.slo import meets_slo


@dataclass
class RunLedger:
    """The requests that ended in this process, as they end.

    Attributes:
        outcomes: Requests by outcome (completed, aborted, rejected).
        met_slo: Completed requests that met both objectives.
        output_tokens: Output tokens of completed requests.
        good_output_tokens: Output tokens of the requests that met the SLO.
        online_requests: Requests of the online lane.
        online_met_slo: Online requests that met both objectives.
        batch_requests: Requests of the batch lane.
        batch_completed: Batch requests completed.
        batch_output_tokens: Output tokens of completed batch requests.
        arrivals_by_second: Requests by the whole second of the clock at which they arrived.
        met_by_second: Those of them that met both objectives.
        given_up_s: Simulated seconds the process gave up because it could not keep up with
            the model's step schedule (:class:`~simulator.server.driver.RealTimeDriver`): on
            a busy machine it serves worse than the model says.
    """

    outcomes: Counter[str] = field(default_factory=Counter)
    met_slo: int = 0
    output_tokens: int = 0
    good_output_tokens: int = 0
    online_requests: int = 0
    online_met_slo: int = 0
    batch_requests: int = 0
    batch_completed: int = 0
    batch_output_tokens: int = 0
    arrivals_by_second: Counter[int] = field(default_factory=Counter)
    met_by_second: Counter[int] = field(default_factory=Counter)
    given_up_s: float = 0.0

    def observe(self, record: FinishedRequest) -> None:
        """Count one request that ended."""
        self.outcomes[record.outcome.value] += 1
        completed = record.outcome is Outcome.COMPLETED
        if completed:
            self.output_tokens += record.output_tokens
        met = meets_slo(record)
        second = int(record.arrived_at)
        self.arrivals_by_second[second] += 1
        if met:
            self.met_by_second[second] += 1
            self.met_slo += 1
            self.good_output_tokens += record.output_tokens
        if lane_of(record.priority) is Lane.BATCH:
            self.batch_requests += 1
            self.batch_completed += completed
            self.batch_output_tokens += record.output_tokens if completed else 0
        else:
            self.online_requests += 1
            self.online_met_slo += met


def summary_line(
    ledger: RunLedger,
    *,
    settings: dict[str, Any],
    ready_at: float | None,
    stopped_at: float,
    preemptions: int,
    load: dict[str, Any] | None,
    gate: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON object of one process (Unix seconds; ``ready_at`` None: it never served).

    ``gate`` is what the gate in front of the load did (``--gate-socket``), or None.
    """
    return {
        "ready_at": ready_at,
        "stopped_at": stopped_at,
        "settings": settings,
        "requests": {
            outcome: ledger.outcomes[outcome] for outcome in ("completed", "aborted", "rejected")
        },
        "met_slo": ledger.met_slo,
        "output_tokens": ledger.output_tokens,
        "good_output_tokens": ledger.good_output_tokens,
        "preemptions": preemptions,
        "lanes": {
            Lane.ONLINE.value: {
                "requests": ledger.online_requests,
                "met_slo": ledger.online_met_slo,
            },
            Lane.BATCH.value: {
                "requests": ledger.batch_requests,
                "completed": ledger.batch_completed,
                "output_tokens": ledger.batch_output_tokens,
            },
        },
        "load": load,
        "gate": gate,
        "given_up_s": round(ledger.given_up_s, 3),
        "by_arrival_second": [
            [second, count, ledger.met_by_second[second]]
            for second, count in sorted(ledger.arrivals_by_second.items())
        ],
    }


def append_summary(path: Path, line: dict[str, Any]) -> None:
    """Append ``line`` to ``path`` as one JSON line, in a single write."""
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(line, sort_keys=True) + "\n")
