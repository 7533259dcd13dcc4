"""The policy test file format, as written (YAML), validated by pydantic; unknown keys refused.

::

    policies: [../kv-thrash.yaml]      # relative to this file; all are loaded
    interval: 10s                      # one evaluation per interval, from t=0
    start: 2026-11-30T12:00:00Z        # the wall clock at t=0, for schedules
    targets:
      main:
        knobs: {max_num_seqs: 256}
        envelopes: {max_num_seqs: {min: 32, max: 1024, max_step: 256}}
    tests:
      - name: thrashing lowers max_num_seqs
        series: {main: {preemptions_per_s: "2x30", ttft_p95_s: "5x30"}}
        approvals: [{at: 3m, policy: kv-thrash, answer: approve}]
        expect:
          - at: 2m
            decisions: [{policy: kv-thrash, kind: intent, set: {max_num_seqs: 192}}]
        final: {knobs: {main: {max_num_seqs: 192}}}

Field descriptions here are what editors show through the JSON Schema
(``docs/schemas/policy-test.schema.json``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field

from daemon.core.knobs import KNOBS
from daemon.core.settings import Envelope, InstanceName
from daemon.policy.durations import parse_duration
from daemon.sources.registry import BUILTIN

DEFAULT_START = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)  # a Monday, noon
EXTRA_KINDS = ("applied", "proposed")  # what the simulated actuator adds to DecisionKind
KIND_NAMES = Literal[
    "fired",
    "resolved",
    "intent",
    "blocked",
    "shadow",
    "alert",
    "notify",
    "tune",
    "realised",
    "error",
    "applied",
    "proposed",
]
KNOB_NAMES: dict[str, Any] = {"propertyNames": {"enum": sorted(KNOBS)}}
SIGNAL_NAMES: dict[str, Any] = {"propertyNames": {"enum": sorted(BUILTIN.names())}}


def _is_duration(value: str | int | float) -> str | int | float:
    parse_duration(value)  # raises ValueError, which pydantic reports at the key
    return value


Duration = Annotated[str | int | float, AfterValidator(_is_duration)]
KnobValue = bool | int | float
Knobs = Annotated[dict[str, KnobValue], Field(json_schema_extra=KNOB_NAMES)]
SeriesText = Annotated[
    str,
    Field(
        description='promtool\'s expanding notation: "a+bxN" is a, a+b, ..., a+Nb (N+1 values); '
        '"axN" is a N+1 times; "_" no data; "_xN" N ticks without data; segments separated '
        "by spaces concatenate. One value per interval from t=0; no data after the end.",
        examples=["0x10 2x20 _x3", "0.5+0.1x5"],
    ),
]
SignalSeries = Annotated[
    dict[str, SeriesText | dict[str, SeriesText]], Field(json_schema_extra=SIGNAL_NAMES)
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetSetupModel(_Model):
    """One simulated vLLM instance: its knob values at t=0 and their envelopes."""

    knobs: Knobs = Field(
        default={},
        description="The current value of each knob at t=0. A knob without a value cannot be "
        "changed (blocked: unknown_current_value).",
        examples=[{"max_num_seqs": 256}],
    )
    envelopes: Annotated[dict[str, Envelope], Field(json_schema_extra=KNOB_NAMES)] = Field(
        default={},
        description="As config.toml's [vllm.knobs.X]: min, max, max_step, min_dwell_s, "
        "hourly_budget. A knob without an envelope is never changed (blocked: no_envelope).",
        examples=[{"max_num_seqs": {"min": 32, "max": 1024, "max_step": 256}}],
    )


class ApprovalModel(_Model):
    """A human's answer to a pending proposal (a policy with risk: approval)."""

    at: Duration = Field(description="When the answer comes, after the tick at that time.")
    policy: str = Field(description="The policy whose pending proposal is answered.")
    target: str | None = Field(
        default=None, description="The target of the proposal (default: every target)."
    )
    answer: Literal["approve", "reject"] = Field(
        description="approve applies the proposal (if the knob still has the value it "
        "assumed; else blocked: stale_proposal); reject drops it."
    )


class ExpectedDecisionModel(_Model):
    """A decision expected at a tick; every key given must match, the others are free."""

    policy: str | None = Field(default=None, description="The policy that decided.")
    target: str | None = Field(default=None, description="The target it decided about.")
    kind: KIND_NAMES | None = Field(
        default=None,
        description="fired, resolved, intent, blocked, shadow, alert, notify, tune, realised, "
        "error; applied (changed by the simulated actuator) or proposed (waiting for an "
        "approval).",
    )
    set: Knobs | None = Field(
        default=None,
        description="The knob values, after the planner's envelopes; every knob must be listed.",
        examples=[{"max_num_seqs": 192}],
    )
    guard: str | None = Field(
        default=None,
        description="The guard that blocked it: schedule, cooldown, budget, no_data, "
        "unknown_current_value, expression_error, conflict, veto, no_envelope, no_change, "
        "dwell, knob_budget, stale_proposal.",
        examples=["cooldown"],
    )
    operation: Literal["restart"] | None = Field(
        default=None, description="The named operation of the decision."
    )


class ExpectationModel(_Model):
    """At one tick, exactly these decisions (in any order); ticks not listed are unchecked."""

    at: Duration = Field(description="The tick, from t=0.", examples=["2m", "2m10s"])
    decisions: tuple[ExpectedDecisionModel, ...] = Field(
        description="Every decision of that tick; [] for none."
    )


class FinalStateModel(_Model):
    """The state at the end of the test."""

    knobs: dict[str, Knobs] = Field(
        default={},
        description="Per target, knob values at the end.",
        examples=[{"main": {"max_num_seqs": 192}}],
    )
    phases: dict[str, dict[str, Literal["inactive", "pending", "firing"]]] = Field(
        default={},
        description="Per policy, per target: inactive, pending or firing at the end.",
        examples=[{"kv-thrash": {"main": "firing"}}],
    )


class CaseModel(_Model):
    """One test: signal series, answers to proposals, and what must happen."""

    name: Annotated[str, Field(min_length=1)] = Field(description="Shown in the report.")
    duration: Duration | None = Field(
        default=None,
        description="How long to run (default: until the longest series, expectation or "
        "approval ends).",
        examples=["5m"],
    )
    series: dict[str, SignalSeries] = Field(
        default={},
        description="Per target, per signal, its values; map signals (host_disk_usage_ratio, "
        "gpu_*) take a map of key to series.",
        examples=[{"main": {"preemptions_per_s": "2x30", "ttft_p95_s": "5x30"}}],
    )
    approvals: tuple[ApprovalModel, ...] = Field(
        default=(), description="Answers to proposals; without one, proposals stay pending."
    )
    expect: tuple[ExpectationModel, ...] = Field(
        default=(), description="The decisions expected at given ticks."
    )
    final: FinalStateModel | None = Field(default=None, description="The state at the end.")


class PolicyTestsModel(_Model):
    """A policy test file: the policies under test, a simulated world, and tests."""

    policies: tuple[str, ...] = Field(
        min_length=1,
        description="Policy files or directories, relative to this file; all are loaded.",
        examples=[["../kv-thrash.yaml"]],
    )
    interval: Duration = Field(
        default="10s", description="The evaluation interval: one tick every interval from t=0."
    )
    start: AwareDatetime = Field(
        default=DEFAULT_START,
        description="The wall clock at t=0, with a time zone (schedules read it).",
        examples=["2026-11-30T12:00:00Z"],
    )
    targets: dict[InstanceName, TargetSetupModel] = Field(
        default={"main": TargetSetupModel()},
        description="The simulated vLLM instances by name (default: one named main).",
    )
    tests: tuple[CaseModel, ...] = Field(min_length=1, description="The tests, run one by one.")
