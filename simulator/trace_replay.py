"""Replay a CSV request trace: ``arrived_at,num_prefill_tokens,num_decode_tokens``.

This is the format of the processed Azure LLM traces published by microsoft/vidur
(``simulator/traces/``). Two deterministic transformations help reuse one trace:

- ``time_scale`` multiplies every arrival time: 0.5 plays the hour in 30 minutes (twice the
  rate, same requests), 2 stretches it.
- ``rate_scale`` multiplies the request rate while keeping the trace's duration and its
  bursts: each request is kept ``floor(r)`` times, plus once more with probability
  ``r - floor(r)`` (drawn from ``random.Random(seed)``). The copies of one request are spread
  evenly over the gap to the next request of the original trace, so that a duplicated
  request does not become a burst of simultaneous arrivals. ``r < 1`` thins the trace.
"""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

from simulator.arrivals import Arrival
from simulator.errors import SpecError, SpecIssue

COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")


def read_trace(
    path: Path, *, time_scale: float = 1.0, rate_scale: float = 1.0, seed: int = 0
) -> list[Arrival]:
    """Read a trace and apply the scales.

    Raises:
        SpecError: unreadable file, wrong header, or rows that are not valid requests (each
            located by line; all of them at once, at most 20).
    """
    if time_scale <= 0 or rate_scale <= 0:
        issue = SpecIssue(path, 0, 0, "", "time_scale and rate_scale must be positive")
        raise SpecError([issue])
    arrivals = _parse(path)
    if time_scale != 1.0:
        arrivals = [
            Arrival(a.arrived_at * time_scale, a.prompt_tokens, a.output_tokens) for a in arrivals
        ]
    if rate_scale != 1.0:
        arrivals = _rescale_rate(arrivals, rate_scale, seed)
    return arrivals


def _parse(path: Path) -> list[Arrival]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise SpecError([SpecIssue(path, 0, 0, "", f"cannot read the trace: {exc}")]) from exc
    if not rows or tuple(cell.strip() for cell in rows[0]) != COLUMNS:
        message = f"the header must be {','.join(COLUMNS)}"
        raise SpecError([SpecIssue(path, 1, 1, "", message)])
    arrivals: list[Arrival] = []
    issues: list[SpecIssue] = []
    previous = 0.0
    for line, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        try:
            arrival = _row(row)
        except ValueError as exc:
            issues.append(SpecIssue(path, line, 1, "", str(exc)))
        else:
            if arrival.arrived_at < previous:
                issues.append(SpecIssue(path, line, 1, COLUMNS[0], "arrivals must not go back"))
            previous = arrival.arrived_at
            arrivals.append(arrival)
        if len(issues) >= 20:
            break
    if issues:
        raise SpecError(issues)
    return arrivals


def _row(row: list[str]) -> Arrival:
    if len(row) != len(COLUMNS):
        msg = f"expected {len(COLUMNS)} columns, got {len(row)}"
        raise ValueError(msg)
    arrived_at = float(row[0])
    prompt, output = int(row[1]), int(row[2])
    if not math.isfinite(arrived_at) or arrived_at < 0:
        msg = f"arrived_at must be a finite time >= 0, got {row[0]!r}"
        raise ValueError(msg)
    if prompt < 1 or output < 1:
        msg = "num_prefill_tokens and num_decode_tokens must be at least 1"
        raise ValueError(msg)
    return Arrival(arrived_at, prompt, output)


def _rescale_rate(arrivals: list[Arrival], rate_scale: float, seed: int) -> list[Arrival]:
    rng = random.Random(seed)  # noqa: S311 - reproducible thinning, not cryptography
    whole = math.floor(rate_scale)
    fraction = rate_scale - whole
    out: list[Arrival] = []
    for index, arrival in enumerate(arrivals):
        copies = whole + (1 if rng.random() < fraction else 0)
        if copies == 0:
            continue
        following = arrivals[index + 1].arrived_at if index + 1 < len(arrivals) else None
        gap = (following - arrival.arrived_at) if following is not None else 0.0
        for copy in range(copies):
            at = arrival.arrived_at + gap * copy / copies
            out.append(Arrival(at, arrival.prompt_tokens, arrival.output_tokens))
    return out
