"""Synthetic workloads: what public traces lack (multi-minute bursts, long outputs), seeded.

A workload spec is a small YAML file (``simulator/workloads/*.yaml``) validated by
:class:`WorkloadSpec`; unknown keys are errors. The generator is deterministic: one seed,
one list of arrivals, on any machine (``random.Random`` with string seeds, stdlib only).

- Arrivals are a gamma renewal process of the given rate and coefficient of variation (CV 1
  is Poisson; the Azure conversation trace has CV ~1.1), modulated by a burst schedule: the
  rate is multiplied by every burst active at the time. The renewal runs in operational time
  (the integral of the rate), so a burst compresses gaps without changing their shape.
- Prompt and output lengths are log-normal, fitted to a median and a 90th percentile and
  clamped to [min, max]; the defaults in the shipped spec are the trace's quantiles.
- A share of requests, optionally only inside a time window (a wave), get a fixed long
  output (4096 tokens by default) instead.
- Ramps (a diurnal rise and fall) multiply the rate by a factor that moves linearly from
  ``from_multiplier`` to ``to_multiplier`` over their window; the generator follows them in
  steps of ``step_s`` (30 s by default), so the schedule stays piecewise constant and its
  inverse integral exact. A ramp may name the engine ``profiles`` it is for (a constant one is
  a phase's own rate), so a phase can load each profile to the same share of its capacity.
- Named phases label stretches of time for reports (``steady``, ``bursts``...). A phase may
  carry its own ``prompt_tokens`` / ``output_tokens`` (a day whose traffic changes kind: chat
  at night, code completion by day): a request arriving in it draws its lengths from them, from
  the same streams, so the arrival times do not move.
- ``profile_rate_scale`` scales the whole rate per engine profile, so that one spec loads
  each profile to the same share of its own capacity (``generate(spec, rate_scale=...)``).

Each attribute draws from its own stream, so changing the long-output share does not move a
single arrival.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulator.arrivals import Arrival
from simulator.spec_files import load_mapping, validate

# Standard normal quantile of 0.9: a log-normal's p90 is exp(mu + Z90 * sigma).
Z90 = 1.2815515655446004


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GammaArrivals(_Spec):
    """Base arrival process: ``rate_rps`` requests per second, inter-arrival CV ``cv``."""

    rate_rps: float = Field(gt=0)
    cv: float = Field(default=1.0, gt=0)


class Burst(_Spec):
    """The rate is multiplied by ``multiplier`` from ``start_s`` for ``duration_s``."""

    start_s: float = Field(ge=0)
    duration_s: float = Field(gt=0)
    multiplier: float = Field(gt=0)


class Ramp(_Spec):
    """The rate is multiplied by a factor moving linearly over ``[start_s, start_s + duration_s)``.

    The factor goes from ``from_multiplier`` to ``to_multiplier``; it is applied in steps of
    ``step_s`` (each step uses the factor at its middle).
    """

    start_s: float = Field(ge=0)
    duration_s: float = Field(gt=0)
    from_multiplier: float = Field(gt=0)
    to_multiplier: float = Field(gt=0)
    step_s: float = Field(default=30.0, gt=0)
    # Only for these engine profiles (empty: all). A phase whose work is bound by a different
    # resource on each profile (KV on one, compute on another) needs its own rate per profile.
    profiles: list[str] = Field(default_factory=list)

    def applies_to(self, profile: str | None) -> bool:
        """Whether the ramp shapes the rate for ``profile`` (None: only profile-free ramps)."""
        return not self.profiles or profile in self.profiles

    def pieces(self) -> list[tuple[float, float, float]]:
        """The ramp as (start, end, multiplier) steps."""
        count = max(1, math.ceil(self.duration_s / self.step_s))
        width = self.duration_s / count
        span = self.to_multiplier - self.from_multiplier
        return [
            (
                self.start_s + index * width,
                self.start_s + (index + 1) * width,
                self.from_multiplier + span * (index + 0.5) / count,
            )
            for index in range(count)
        ]


class LogNormalLengths(_Spec):
    """Token counts drawn log-normally from a median and a p90, clamped to [min, max]."""

    median: float = Field(gt=0)
    p90: float = Field(gt=0)
    min: int = Field(default=1, ge=1)
    max: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> LogNormalLengths:
        if self.p90 <= self.median:
            msg = "p90 must be greater than median"
            raise ValueError(msg)
        if self.max < self.min:
            msg = "max must not be below min"
            raise ValueError(msg)
        return self

    def draw(self, rng: random.Random) -> int:
        """One length."""
        sigma = math.log(self.p90 / self.median) / Z90
        value = rng.lognormvariate(math.log(self.median), sigma)
        return max(self.min, min(self.max, round(value)))


class NamedPhase(_Spec):
    """A labelled stretch of the workload, for per-phase reports, with its own lengths or not."""

    name: str = Field(min_length=1)
    start_s: float = Field(ge=0)
    duration_s: float = Field(gt=0)
    prompt_tokens: LogNormalLengths | None = None
    output_tokens: LogNormalLengths | None = None

    def contains(self, at: float) -> bool:
        """Whether a request arriving at ``at`` falls inside the phase."""
        return self.start_s <= at < self.start_s + self.duration_s


class LongOutputs(_Spec):
    """A ``share`` of requests, inside the window if one is given, output ``tokens`` tokens."""

    share: float = Field(ge=0, le=1)
    tokens: int = Field(default=4096, ge=1)
    start_s: float = Field(default=0.0, ge=0)
    duration_s: float | None = Field(default=None, gt=0)

    def applies_at(self, at: float) -> bool:
        """Whether a request arriving at ``at`` is inside the window."""
        end = math.inf if self.duration_s is None else self.start_s + self.duration_s
        return self.start_s <= at < end


class WorkloadSpec(_Spec):
    """A synthetic workload."""

    name: str = Field(min_length=1)
    description: str = ""
    duration_s: float = Field(gt=0)
    seed: int = 0
    arrivals: GammaArrivals
    bursts: list[Burst] = Field(default_factory=list)
    ramps: list[Ramp] = Field(default_factory=list)
    phases: list[NamedPhase] = Field(default_factory=list)
    profile_rate_scale: dict[str, float] = Field(default_factory=dict)
    prompt_tokens: LogNormalLengths
    output_tokens: LogNormalLengths
    long_outputs: LongOutputs | None = None

    @model_validator(mode="after")
    def _positive_scales(self) -> WorkloadSpec:
        bad = sorted(name for name, scale in self.profile_rate_scale.items() if not scale > 0)
        if bad:
            msg = f"profile_rate_scale must be positive (not for {', '.join(bad)})"
            raise ValueError(msg)
        return self

    def rate_scale_for(self, profile: str) -> float:
        """The rate scale of ``profile`` (1 when the spec names none)."""
        return self.profile_rate_scale.get(profile, 1.0)


def load_workload(path: Path) -> WorkloadSpec:
    """Load and validate a workload spec.

    Raises:
        SpecError: the file is missing, unreadable or invalid (each problem located).
    """
    document, locations = load_mapping(path)
    return validate(WorkloadSpec, document, path, locations)


def generate(
    spec: WorkloadSpec,
    seed: int | None = None,
    *,
    rate_scale: float = 1.0,
    profile: str | None = None,
) -> list[Arrival]:
    """The arrivals of ``spec``, from ``seed`` (default: the spec's own), rate x ``rate_scale``.

    ``profile`` selects the ramps meant for that engine profile; without it only the ramps for
    every profile apply.
    """
    if not rate_scale > 0:
        msg = f"rate_scale must be positive, not {rate_scale}"
        raise ValueError(msg)
    base = spec.seed if seed is None else seed
    # Reproducible simulation, not cryptography: a seeded Mersenne Twister is the point.
    gaps = random.Random(f"{base}/arrivals")  # noqa: S311
    prompts = random.Random(f"{base}/prompt_tokens")  # noqa: S311
    outputs = random.Random(f"{base}/output_tokens")  # noqa: S311
    longs = random.Random(f"{base}/long_outputs")  # noqa: S311
    shape = 1.0 / spec.arrivals.cv**2
    schedule = _RateSchedule(spec, rate_scale, profile)
    arrivals: list[Arrival] = []
    now = 0.0
    while True:
        # Mean-1 gaps in operational time; the schedule maps them to seconds.
        now = schedule.advance(now, gaps.gammavariate(shape, 1.0 / shape))
        if now >= spec.duration_s:
            return arrivals
        phase = next((p for p in spec.phases if p.contains(now)), None)
        prompt = ((phase and phase.prompt_tokens) or spec.prompt_tokens).draw(prompts)
        output = ((phase and phase.output_tokens) or spec.output_tokens).draw(outputs)
        long_draw = longs.random()
        long = spec.long_outputs
        if long is not None and long.applies_at(now) and long_draw < long.share:
            output = long.tokens
        arrivals.append(Arrival(now, prompt, output))


class _RateSchedule:
    """The piecewise-constant arrival rate and its inverse integral."""

    def __init__(
        self, spec: WorkloadSpec, rate_scale: float = 1.0, profile: str | None = None
    ) -> None:
        pieces = [(b.start_s, b.start_s + b.duration_s, b.multiplier) for b in spec.bursts]
        for ramp in spec.ramps:
            if ramp.applies_to(profile):
                pieces.extend(ramp.pieces())
        edges = {0.0, spec.duration_s}
        for start, end, _ in pieces:
            edges.update((start, end))
        self._edges = sorted(edge for edge in edges if edge <= spec.duration_s)
        self._rates = []
        for start in self._edges:
            rate = spec.arrivals.rate_rps * rate_scale
            for begin, end, multiplier in pieces:
                if begin <= start < end:
                    rate *= multiplier
            self._rates.append(rate)

    def advance(self, now: float, work: float) -> float:
        """The time at which ``work`` units of operational time after ``now`` have passed."""
        index = 0
        while index + 1 < len(self._edges) and self._edges[index + 1] <= now:
            index += 1
        while True:
            rate = self._rates[index]
            end = self._edges[index + 1] if index + 1 < len(self._edges) else math.inf
            room = (end - now) * rate
            if work <= room:
                return now + work / rate
            work -= room
            now = end
            index += 1
