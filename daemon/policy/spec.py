"""The policy file format, and the frozen specs validated files become.

A policy file is YAML (see ``docs/policies.md`` for every field)::

    name: kv-thrash
    description: Fewer sequences when the KV cache thrashes and TTFT breaks the SLO.
    targets: [main]                # vLLM instances by name; default: every instance
    when: preemptions_per_s > 0.5 && ttft_p95_s > 2.0
    for: 2m                        # must hold this long before the policy fires
    clear: preemptions_per_s < 0.05   # hysteresis: stops firing only once this holds
    keep_firing_for: 5m
    on_no_data: hold               # hold | assume_ok | assume_bad
    action:
      set: { max_num_seqs: "math.greatest(current * 0.75, 32.0)" }
      risk: approval               # auto | approval; restart-required knobs default to approval
      # or: operation: restart     (a named operation instead of knob values)
      # or: veto: [max_num_seqs]   (while this fires, no policy may move these the unsafe way)
      # or: admission: {controller: slo-band, every: 2s, min_cap: 4}
      #                            (while this fires, a fast loop moves the admission cap)
      # or: notify: {text: "KV at {kv_usage}", channels: [mqtt, slack]}   (only tells people)
      # or: batch: {open: true, concurrency: "current + 1.0"}
      #                            (while this fires, the batch lane is open this wide, or closed)
      # or: tune: {knobs: [max_num_seqs, max_num_batched_tokens], objective: goodput,
      #            min_gain: 10%}   (a what-if picks the values; see TuneModel)
    scope: instance                # group: one proposal for the fleet group, rolled out
    # canary: {window: 5m, max_attainment_drop: 5%, max_goodput_drop: 10%,
    #          max_error_rate_rise: 1%, min_requests: 20}   (scope: group only)
    cooldown: 30m                  # at most one action per cooldown while it keeps firing
    budget_per_hour: 2
    mode: active                   # shadow: decide and record, never act
    schedule:
      windows: [{cron: "0 2 * * sat", duration: 4h}]   # may act only inside these
      # at: [{cron: "45 7 * * mon-fri"}]   a scheduled change: act at these moments only
      #                                    (with `when: "true"` for an unconditional one)

Validation of the shape is pydantic's; knob names are checked with the expressions (so that a
file's every problem is reported at once), and expressions are compiled (and type-checked) by
CEL while the file is loaded, so a loaded policy cannot fail to compile later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from daemon.fleet.canary_analysis import CanaryRule
from daemon.policy.durations import parse_duration
from daemon.policy.expressions import Expression
from daemon.policy.schedules import CronTimes, CronWindow

PolicyName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]
ALL_TARGETS = "*"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _duration(value: object) -> float:
    if not isinstance(value, str | int | float):
        message = "a duration such as 30s, 2m or 1h"
        raise ValueError(message)  # noqa: TRY004 - pydantic turns ValueErrors into input errors
    return parse_duration(value)


class WindowModel(_Model):
    """A recurring window in which the policy may act."""

    cron: str
    duration: str
    timezone: str = "UTC"

    @field_validator("duration")
    @classmethod
    def _is_duration(cls, value: str) -> str:
        _duration(value)
        return value


class AtModel(_Model):
    """A moment at which a scheduled change is due."""

    cron: str
    timezone: str = "UTC"


class ScheduleModel(_Model):
    """When the policy may act."""

    windows: tuple[WindowModel, ...] = ()
    at: tuple[AtModel, ...] = ()


class AdmissionModel(_Model):
    """A fast-loop controller of the admission cap at the gate in front of vLLM."""

    controller: str
    every: str | int | float = "2s"
    min_cap: Annotated[int, Field(ge=1)] = 1
    params: dict[str, float] = {}

    @field_validator("every")
    @classmethod
    def _is_duration(cls, value: str | int | float) -> str | int | float:
        if _duration(value) <= 0:
            message = "the controller's interval must be above zero"
            raise ValueError(message)
        return value


class NotifyModel(_Model):
    """A message to people when the policy fires (and again each cooldown while it fires)."""

    text: Annotated[str, StringConstraints(min_length=1, max_length=2000)]
    channels: Annotated[tuple[Literal["mqtt", "slack"], ...], Field(min_length=1)] = ("mqtt",)


class TuneModel(_Model):
    """A setting picked by a what-if over the knobs' envelopes, instead of a fixed step."""

    knobs: Annotated[tuple[str, ...], Field(min_length=1)] = (
        "max_num_seqs",
        "max_num_batched_tokens",
    )
    objective: Literal["goodput", "slo_attainment"] = "goodput"
    min_gain: str | int | float = "10%"
    window: str | int | float = "10m"
    profile: str | None = None
    ttft_slo: str | int | float = "2s"
    tpot_slo: str | int | float = "100ms"
    max_error: str | int | float = "30%"

    @field_validator("min_gain", "max_error")
    @classmethod
    def _is_share(cls, value: str | int | float) -> str | int | float:
        parse_share(value)
        return value

    @field_validator("window", "ttft_slo", "tpot_slo")
    @classmethod
    def _is_duration(cls, value: str | int | float) -> str | int | float:
        if _duration(value) <= 0:
            message = "must be above zero"
            raise ValueError(message)
        return value


def parse_share(value: str | int | float) -> float:
    """A share written ``10%`` or ``0.1``, as a fraction in [0, 1].

    Raises:
        ValueError: neither form, or outside [0%, 100%] (a bare number above 1 is ambiguous).
    """
    if isinstance(value, bool):
        message = "a share such as 10% or 0.1, not a boolean"
        raise ValueError(message)  # noqa: TRY004 - pydantic reports ValueErrors as input errors
    if isinstance(value, str):
        text = value.strip()
        try:
            share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            message = f"{value!r} is not a share: write e.g. 10% or 0.1"
            raise ValueError(message) from None
    else:
        share = float(value)
    if not 0.0 <= share <= 1.0:
        message = f"{value!r} is not a share between 0% and 100% (write 10% or 0.1)"
        raise ValueError(message)
    return share


class BatchModel(_Model):
    """The batch lane of the target while the policy fires: open this wide, or closed."""

    open: bool = True
    concurrency: str | int | float | None = None
    start_spacing: str | int | float | None = None


class ActionModel(_Model):
    """What the policy does when it fires."""

    set: dict[str, str | int | float | bool] = {}
    operation: Literal["restart"] | None = None
    veto: tuple[str, ...] = ()
    admission: AdmissionModel | None = None
    notify: NotifyModel | None = None
    tune: TuneModel | None = None
    batch: BatchModel | None = None
    risk: Literal["auto", "approval"] | None = None


class CanaryModel(_Model):
    """How a group change's canary is judged against the members not yet changed."""

    window: str | int | float = "5m"
    max_attainment_drop: str | int | float = "5%"
    max_goodput_drop: str | int | float = "10%"
    max_error_rate_rise: str | int | float = "1%"
    min_requests: Annotated[int, Field(ge=1, le=1_000_000)] = 20
    ttft_slo: str | int | float = "2s"

    @field_validator("window", "ttft_slo")
    @classmethod
    def _is_duration(cls, value: str | int | float) -> str | int | float:
        if _duration(value) <= 0:
            message = "must be above zero"
            raise ValueError(message)
        return value

    @field_validator("max_attainment_drop", "max_goodput_drop", "max_error_rate_rise")
    @classmethod
    def _is_share(cls, value: str | int | float) -> str | int | float:
        parse_share(value)
        return value


class PolicyModel(_Model):
    """One policy file, as written."""

    name: PolicyName
    description: str = ""
    targets: tuple[str, ...] = (ALL_TARGETS,)
    when: str
    for_: str | int | float = Field(default="0s", alias="for")
    clear: str | None = None
    keep_firing_for: str | int | float = "0s"
    on_no_data: Literal["hold", "assume_ok", "assume_bad"] = "hold"
    action: ActionModel | None = None
    cooldown: str | int | float = "10m"
    budget_per_hour: Annotated[int, Field(ge=0, le=60)] = 4
    mode: Literal["active", "shadow"] = "active"
    schedule: ScheduleModel | None = None
    scope: Literal["instance", "group"] = "instance"
    canary: CanaryModel | None = None

    @field_validator("for_", "keep_firing_for", "cooldown")
    @classmethod
    def _is_duration(cls, value: str | int | float) -> str | int | float:
        _duration(value)
        return value


class NoData(Enum):
    """What a policy does when a signal it reads has no fresh value."""

    HOLD = "hold"  # change nothing: neither start nor stop firing, never act
    ASSUME_OK = "assume_ok"  # as if the condition were false (and the clear condition true)
    ASSUME_BAD = "assume_bad"  # as if it were true, but only to alert: never act on it


@dataclass(frozen=True, slots=True)
class KnobChange:
    """A knob and the expression of its new value (over ``current`` and signals)."""

    knob: str
    value: Expression


@dataclass(frozen=True, slots=True)
class AdmissionSpec:
    """A fast-loop admission controller, run by the engine while its policy fires.

    The loop is live and low risk (a cap at the proxy, no restart): the policy's cooldown and
    budget do not pace it; the controller's own step does, every ``interval_s``. Its cap stays
    within ``[min_cap, max-num-seqs]`` of the instance; when the policy stops firing, the gate
    is opened back to ``max-num-seqs``.

    Attributes:
        controller: A name of :data:`daemon.policy.admission.controllers.CONTROLLERS`.
        interval_s: Seconds between two steps of the controller.
        min_cap: The lowest cap it may set.
        params: The controller's own parameters (checked when the file is loaded).
    """

    controller: str
    interval_s: float
    min_cap: int
    params: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """A validated action."""

    changes: tuple[KnobChange, ...]
    operation: str | None
    risk: str  # "auto" or "approval"
    vetoes: tuple[str, ...] = ()  # knobs no policy may move the unsafe way while this fires
    admission: AdmissionSpec | None = None  # a fast loop on the admission cap while this fires
    notify: NotifySpec | None = None  # a message to people instead of a change
    tune: TuneSpec | None = None  # values a what-if picks, instead of expressions
    batch: BatchLaneSpec | None = None  # the batch lane's width while this fires


@dataclass(frozen=True, slots=True)
class BatchLaneSpec:
    """A validated ``batch`` action: the lane open at ``concurrency``, or closed (None).

    Like an admission loop, it acts through its firing (:mod:`daemon.policy.batch_lane`): the
    lane's width is re-read from the expression at every look while the policy fires, and the
    lane closes when no opening policy fires. ``current`` is the lane's width now.
    ``start_spacing_s`` paces the lane: at least this long between two of its requests'
    starts (0: none), so that no two batch prefills land in the same engine step;
    ``start_spacing``, when set, is a CEL number of seconds that replaces it, re-read at every
    look like ``concurrency``.
    """

    concurrency: Expression | None
    start_spacing_s: float = 0.0
    start_spacing: Expression | None = None


@dataclass(frozen=True, slots=True)
class NotifySpec:
    """A validated ``notify`` action: its template (fields checked) and where it goes."""

    text: str
    channels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TuneSpec:
    """A validated ``tune`` action: what a what-if round is asked when the policy is due.

    The round runs in the engine, off the event loop; its pick becomes an ordinary intent for
    the planner, and a change predicted to gain less than ``min_gain`` is never asked for.

    Attributes:
        knobs: The knobs it may move (of :data:`TUNABLE`); the others stay as they are.
        objective: ``goodput`` (requests per second within the SLO; the gain is relative) or
            ``slo_attainment`` (the share of requests within it; the gain is in points).
        min_gain: The least predicted gain, as a fraction (0.1 is 10%).
        window_s: The recent window whose workload is characterised.
        profile: The engine profile to simulate (a shipped name or a file), or None for the
            default.
        ttft_slo_s: The TTFT a request must meet.
        tpot_slo_s: The TPOT a request must meet.
        max_error: The largest goodput prediction error (a fraction) the realised effect of
            an applied change may show before the policy is quarantined on that target.
    """

    knobs: tuple[str, ...]
    objective: str
    min_gain: float
    window_s: float
    profile: str | None
    ttft_slo_s: float
    tpot_slo_s: float
    max_error: float = 0.30


TUNABLE = ("max_num_seqs", "max_num_batched_tokens")
"""The knobs a ``tune`` action may name: those the what-if varies."""


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A validated, compiled policy. Immutable: runtime state lives in :class:`PolicyState`."""

    name: str
    description: str
    source: str  # the file it came from
    targets: tuple[str, ...]
    when: Expression
    clear: Expression | None
    for_s: float
    keep_firing_for_s: float
    on_no_data: NoData
    action: ActionSpec | None
    cooldown_s: float
    budget_per_hour: int
    shadow: bool
    windows: tuple[CronWindow, ...]
    at: tuple[CronTimes, ...] = ()
    # A group change: one proposal for the group, rolled out canary first (docs/fleet.md).
    canary: CanaryRule | None = None

    @property
    def group_scoped(self) -> bool:
        """Whether it changes a fleet group as one (``scope: group``), canary first."""
        return self.canary is not None

    def applies_to(self, target: str) -> bool:
        """Whether this policy watches ``target``."""
        return ALL_TARGETS in self.targets or target in self.targets
