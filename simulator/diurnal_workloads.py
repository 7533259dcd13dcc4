"""A day of online traffic from a real trace, compressed in virtual time, with a batch backlog.

A diurnal spec (``simulator/workloads/diurnal-*.yaml``, validated by :class:`DiurnalSpec`;
unknown keys are errors) describes:

- **The online day.** The requests of a real trace (``trace:``, a shipped name or a path), in
  their order, with their own lengths and their own gaps, replayed at a pace that follows the
  hour of the day: ``hourly`` gives 24 multipliers of the trace's own rate (one per hour, at
  the hour's middle; linear in between, in ``steps_per_hour`` constant steps), times
  ``rate_scale`` (and ``profile_rate_scale`` for one engine profile). Where the multiplier is
  2 the trace plays twice as fast; at a night-time 0.05, twenty times slower. The trace is
  looped when the day needs more of it. So the day keeps the trace's second-scale burstiness
  and length mix (inter-arrival CV ~1.1, simulator/traces/README.md) and takes its slow shape
  from the hours.
- **Compression.** One hour of the day lasts ``hour_s`` simulated seconds (3600: a real day).
  The engine's step times are the profile's, so at any moment the load is what the hour's
  rate says; what compression shortens is how long each hour lasts, and so the number of
  requests and steps a run must simulate.
- **The batch backlog.** ``batch:`` describes offline work waiting from the start of the day:
  ``requests`` jobs of seeded log-normal lengths, sent at ``priority`` (above 0: the batch
  lane of :mod:`simulator.lanes`). The spec does not say when they are sent: that is what a
  batch window decides (none, a nightly cron window, the governor's); :func:`batch_jobs`
  lists them, in the order a batch runner would send them.

Deterministic: one seed, the same arrivals and jobs on any machine.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from simulator.arrivals import Arrival
from simulator.shipped import shipped_input
from simulator.spec_files import load_mapping, validate
from simulator.synthetic_workloads import LogNormalLengths
from simulator.trace_replay import read_trace

HOURS_PER_DAY = 24


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BatchBacklog(_Spec):
    """Offline jobs waiting from the start of the day."""

    requests: int = Field(ge=1)
    priority: int = Field(default=1000, gt=0)
    prompt_tokens: LogNormalLengths
    output_tokens: LogNormalLengths


class DiurnalSpec(_Spec):
    """A compressed day of a real trace's traffic, and a batch backlog."""

    name: str = Field(min_length=1)
    description: str = ""
    trace: str = Field(min_length=1)
    hour_s: float = Field(gt=0)
    rate_scale: float = Field(default=1.0, gt=0)
    profile_rate_scale: dict[str, float] = Field(default_factory=dict)
    hourly: list[float]
    steps_per_hour: int = Field(default=12, ge=1)
    seed: int = 0
    batch: BatchBacklog | None = None

    @field_validator("hourly")
    @classmethod
    def _one_positive_multiplier_per_hour(cls, hourly: list[float]) -> list[float]:
        if len(hourly) != HOURS_PER_DAY:
            msg = f"must give {HOURS_PER_DAY} multipliers, one per hour (got {len(hourly)})"
            raise ValueError(msg)
        if not all(value > 0 for value in hourly):
            msg = "every multiplier must be positive"
            raise ValueError(msg)
        return hourly

    @model_validator(mode="after")
    def _positive_scales(self) -> DiurnalSpec:
        bad = sorted(name for name, scale in self.profile_rate_scale.items() if not scale > 0)
        if bad:
            msg = f"profile_rate_scale must be positive (not for {', '.join(bad)})"
            raise ValueError(msg)
        return self

    @property
    def duration_s(self) -> float:
        """The simulated length of the day."""
        return HOURS_PER_DAY * self.hour_s

    def multiplier_at(self, hour: float) -> float:
        """The hourly multiplier at ``hour`` (0-24), linear between the hours' middles."""
        position = hour - 0.5
        below = math.floor(position)
        share = position - below
        low = self.hourly[below % HOURS_PER_DAY]
        high = self.hourly[(below + 1) % HOURS_PER_DAY]
        return low + (high - low) * share


def load_diurnal(path: Path) -> DiurnalSpec:
    """Load and validate a diurnal spec.

    Raises:
        SpecError: the file is missing, unreadable or invalid (each problem located).
    """
    document, locations = load_mapping(path)
    return validate(DiurnalSpec, document, path, locations)


def online_arrivals(spec: DiurnalSpec, *, profile: str | None = None) -> list[Arrival]:
    """The day's online requests (priority 0), the trace replayed at the hours' pace.

    Raises:
        SpecError: the trace cannot be read.
    """
    trace = read_trace(shipped_input(spec.trace))
    if not trace:
        return []
    scale = spec.rate_scale * (spec.profile_rate_scale.get(profile, 1.0) if profile else 1.0)
    # One loop of the trace lasts its span plus one mean gap, so loops join without a burst.
    span = trace[-1].arrived_at - trace[0].arrived_at
    loop_s = span + span / max(1, len(trace) - 1)
    steps = _pace_steps(spec, scale)
    arrivals: list[Arrival] = []
    step = 0
    step_start, step_trace_start = 0.0, 0.0
    loop = 0
    while True:
        for request in trace:
            trace_at = loop * loop_s + request.arrived_at - trace[0].arrived_at
            # Advance to the step in which the trace has played up to trace_at.
            while step < len(steps):
                _, end, pace = steps[step]
                step_trace_end = step_trace_start + (end - step_start) * pace
                if trace_at < step_trace_end:
                    break
                step += 1
                step_start, step_trace_start = end, step_trace_end
            if step >= len(steps):
                return arrivals
            pace = steps[step][2]
            at = step_start + (trace_at - step_trace_start) / pace
            arrivals.append(Arrival(at, request.prompt_tokens, request.output_tokens))
        loop += 1


def _pace_steps(spec: DiurnalSpec, scale: float) -> list[tuple[float, float, float]]:
    """The day as (start, end, trace seconds per simulated second) constant steps."""
    count = HOURS_PER_DAY * spec.steps_per_hour
    width = spec.duration_s / count
    steps = []
    for index in range(count):
        middle_hour = (index + 0.5) / spec.steps_per_hour
        steps.append((index * width, (index + 1) * width, scale * spec.multiplier_at(middle_hour)))
    return steps


def batch_jobs(spec: DiurnalSpec, seed: int | None = None) -> list[Arrival]:
    """The backlog's jobs in sending order, each as an arrival at 0 with the batch priority.

    A runner sends them when its window lets it; only the lengths and the priority are the
    spec's.
    """
    return list(iter_batch_jobs(spec, seed))


def iter_batch_jobs(spec: DiurnalSpec, seed: int | None = None) -> Iterator[Arrival]:
    """:func:`batch_jobs` one at a time, drawn as they are taken (the same jobs, in order).

    A runner that takes a few thousand jobs of a large backlog draws only those.
    """
    backlog = spec.batch
    if backlog is None:
        return
    base = spec.seed if seed is None else seed
    # Reproducible simulation, not cryptography: a seeded Mersenne Twister is the point.
    prompts = random.Random(f"{base}/batch/prompt_tokens")  # noqa: S311
    outputs = random.Random(f"{base}/batch/output_tokens")  # noqa: S311
    for _ in range(backlog.requests):
        yield Arrival(
            0.0,
            backlog.prompt_tokens.draw(prompts),
            backlog.output_tokens.draw(outputs),
            priority=backlog.priority,
        )
