"""``sim serve --summary PATH``: what one server process did, appended as a JSON line on exit.

A restart is a new process whose counters start at zero (as vLLM's do), so a run that spans
restarts is told by the lines of every process together, in the order they ran. Each line
counts the requests that ended in this process by outcome, those that met the SLO
(:func:`simulator.report.meets_slo`: the same rule as ``sim run``'s report) and their output
tokens, the preemptions, and which slice of the ``--load`` workload this process dealt with:
arrivals ``[first, next)`` in workload order, so that the arrivals no process dealt with
(they fell while the server was down) can be counted by whoever reads the lines. A process
stopped while it was still loading writes a line too, with ``ready_at`` null and no requests.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.report import meets_slo
from simulator.requests import FinishedRequest


@dataclass
class RunLedger:
    """The requests that ended in this process, as they end.

    Attributes:
        outcomes: Requests by outcome (completed, aborted, rejected).
        met_slo: Completed requests that met both objectives.
        output_tokens: Output tokens of completed requests.
        good_output_tokens: Output tokens of the requests that met the SLO.
    """

    outcomes: Counter[str] = field(default_factory=Counter)
    met_slo: int = 0
    output_tokens: int = 0
    good_output_tokens: int = 0

    def observe(self, record: FinishedRequest) -> None:
        """Count one request that ended."""
        self.outcomes[record.outcome.value] += 1
        if record.outcome.value == "completed":
            self.output_tokens += record.output_tokens
        if meets_slo(record):
            self.met_slo += 1
            self.good_output_tokens += record.output_tokens


def summary_line(
    ledger: RunLedger,
    *,
    settings: dict[str, Any],
    ready_at: float | None,
    stopped_at: float,
    preemptions: int,
    load: dict[str, Any] | None,
) -> dict[str, Any]:
    """The JSON object of one process (Unix seconds; ``ready_at`` None: it never served)."""
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
        "load": load,
    }


def append_summary(path: Path, line: dict[str, Any]) -> None:
    """Append ``line`` to ``path`` as one JSON line, in a single write."""
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(line, sort_keys=True) + "\n")
