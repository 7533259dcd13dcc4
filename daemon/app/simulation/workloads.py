"""A workload for ``simulate``: the arrivals of one seed, with the phases and bursts to report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simulator.arrivals import Arrival
from simulator.shipped import shipped_input
from simulator.synthetic_workloads import generate, load_workload
from simulator.trace_replay import read_trace

WHOLE = "whole"


@dataclass(frozen=True, slots=True)
class Stretch:
    """A named stretch of time: a phase, or a burst (with its rate multiplier)."""

    name: str
    start_s: float
    end_s: float
    multiplier: float = 1.0

    def contains(self, at: float) -> bool:
        """Whether ``at`` falls inside ``[start_s, end_s)``."""
        return self.start_s <= at < self.end_s


@dataclass(frozen=True, slots=True)
class Workload:
    """What one run replays.

    Attributes:
        name: The spec's name or the trace's file name.
        arrivals: The requests, sorted by arrival time.
        duration_s: How long arrivals come (goodput is over this).
        phases: Named phases; one phase ``whole`` when the workload names none.
        bursts: The spec's bursts (none for a trace).
    """

    name: str
    arrivals: list[Arrival]
    duration_s: float
    phases: tuple[Stretch, ...]
    bursts: tuple[Stretch, ...]


def load(*, trace: Path | None, spec: Path | None, seed: int, profile: str) -> Workload:
    """The workload of a trace (seeds change nothing) or of a spec at ``seed``.

    A spec's ``profile_rate_scale`` for ``profile`` scales its rate.

    Raises:
        SpecError: the file is missing or invalid.
    """
    if trace is not None:
        trace = shipped_input(trace)
        arrivals = read_trace(trace)
        end = arrivals[-1].arrived_at if arrivals else 0.0
        duration = max(end, 1.0)
        return Workload(trace.name, arrivals, duration, (Stretch(WHOLE, 0.0, duration),), ())
    if spec is None:
        message = "a trace or a workload spec is needed"
        raise ValueError(message)
    workload = load_workload(shipped_input(spec))
    arrivals = generate(
        workload, seed, rate_scale=workload.rate_scale_for(profile), profile=profile
    )
    phases = tuple(
        Stretch(p.name, p.start_s, p.start_s + p.duration_s) for p in workload.phases
    ) or (Stretch(WHOLE, 0.0, workload.duration_s),)
    bursts = tuple(
        Stretch(f"burst@{b.start_s:g}s", b.start_s, b.start_s + b.duration_s, b.multiplier)
        for b in workload.bursts
    )
    return Workload(workload.name, arrivals, workload.duration_s, phases, bursts)
