"""Preflight: every reason not to make a planned change, found before anything is touched. Pure.

In order: the request is for this server; no freeze; the resulting config carries no flag the
version removed and nothing the governor never sets (``disable-log-stats``); the knobs agree
with each other as the version demands (in 0.33, ``max_num_batched_tokens >= max_num_seqs``
and ``max_num_active_seqs <= max_num_seqs``); vLLM's drain (``shutdown-timeout``) ends before
the restart command's time limit; each change stays in its envelope; the value on disk
is still the one the policy decided on (or the decision is stale); and the knob's dwell time
and hourly budget, read from the journal, allow another change. A restart without a config
change (``operation: restart``) is held to the instance's restart envelope instead: at most
``restart_hourly_budget`` restarts an hour, ``restart_min_interval_s`` apart. The asynchronous
checks (version, health, vLLM's own parser, one change in flight) are the actuator's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from actuators.vllm.config_text import knob_value, read_env, read_yaml_options
from actuators.vllm.plan import ChangePlan
from actuators.vllm.registry import VersionRegistry
from daemon.api import (
    ActuationRefused,
    ChangeRequest,
    VllmInstance,
    envelope_problems,
    pace_problem,
)

Refusal = tuple[str, str]  # (guard, why)
HOUR_S = 3600.0


def preflight(
    instance: VllmInstance,
    request: ChangeRequest,
    plan: ChangePlan,
    registry: VersionRegistry,
    *,
    frozen: str,
    changed_at: Mapping[str, Sequence[datetime]],
    now: datetime,
    restarted_at: Sequence[datetime] = (),
) -> list[Refusal]:
    """Every refusal, in the order above; an empty list means the change may go ahead.

    ``restarted_at`` are the times the server was restarted by the governor in the last hour
    (any change that was applied): a restart operation must fit its envelope among them.
    """
    if request.target != instance.name:
        return [("target", f"the request is for {request.target}, not {instance.name}")]
    refusals: list[Refusal] = []
    if frozen:
        refusals.append(("frozen", frozen))
    refusals.extend(_forbidden_flags(plan, registry))
    refusals.extend(_consistency(plan, registry))
    refusals.extend(_drain_fits(instance, plan))
    refusals.extend(knob_refusals(instance, request, plan.knobs, changed_at=changed_at, now=now))
    if plan.operation == "restart":
        refusals.extend(restart_refusals(instance, restarted_at, now))
    elif not any(change.changed for change in plan.files):
        refusals.append(("no_change", "the files already say so"))
    return refusals


def knob_refusals(
    instance: VllmInstance,
    request: ChangeRequest,
    knobs: Mapping[str, tuple[float | None, float]],
    *,
    changed_at: Mapping[str, Sequence[datetime]],
    now: datetime,
) -> list[Refusal]:
    """Each knob's move (value now, value planned): known, in its envelope, fresh, paced.

    The checks of :func:`preflight` that need no file: a backtest's would-have actuator runs
    them on the recorded values.
    """
    refusals: list[Refusal] = []
    for knob, (old, new) in knobs.items():
        envelope = instance.knobs.get(knob)
        if old is None:
            refusals.append(("unknown_current_value", f"the current {knob} is not known"))
            continue
        refusals.extend(
            ("envelope", problem) for problem in envelope_problems(knob, envelope, old, new)
        )
        seen = request.current.get(knob)
        if seen is not None and seen != old:
            why = f"{knob} is {old:g} on disk, not {seen:g} as when the policy decided"
            refusals.append(("stale", why))
        if envelope is not None and (
            late := pace_problem(knob, envelope, changed_at.get(knob, ()), now)
        ):
            refusals.append(("knob_budget", late))
    return refusals


def restart_refusals(
    instance: VllmInstance, restarted_at: Sequence[datetime], now: datetime
) -> list[Refusal]:
    """A restart without a config change: the instance's restart budget and interval."""
    recent = [at for at in restarted_at if (now - at).total_seconds() < HOUR_S]
    if len(recent) >= instance.restart_hourly_budget:
        budget = instance.restart_hourly_budget
        why = f"{instance.name} restarted {len(recent)}x this hour (restart_hourly_budget {budget})"
        return [("restart_budget", why)]
    if recent and (since := (now - max(recent)).total_seconds()) < instance.restart_min_interval_s:
        why = f"{instance.name} was restarted {since:.0f} s ago"
        return [("dwell", f"{why} (restart_min_interval_s {instance.restart_min_interval_s:g})")]
    return []


def _forbidden_flags(plan: ChangePlan, registry: VersionRegistry) -> list[Refusal]:
    options = read_yaml_options(plan.files[0].new_text, str(plan.files[0].path))
    refusals = []
    for key, value in options.items():
        if key in registry.removed:
            refusals.append(("registry", f"{key}: {registry.removed[key]}"))
        if key in registry.never and value not in (False, None):
            refusals.append(("registry", f"{key} is never set: {registry.never[key]}"))
    return refusals


def _consistency(plan: ChangePlan, registry: VersionRegistry) -> list[Refusal]:
    """The cross-knob rules vLLM itself enforces at start (SchedulerConfig)."""
    options = read_yaml_options(plan.files[0].new_text, str(plan.files[0].path))
    env = read_env(plan.files[1].new_text) if len(plan.files) > 1 else {}

    def value(knob: str) -> float | None:
        flag = registry.knobs.get(knob)
        return None if flag is None else knob_value(flag, options, env)

    refusals = []
    for larger, smaller in registry.at_least:
        big, small = value(larger), value(smaller)
        if big is not None and small is not None and big < small:
            why = f"{larger} ({big:g}) must be >= {smaller} ({small:g}): vLLM would not start"
            refusals.append(("registry", why))
    return refusals


def _drain_fits(instance: VllmInstance, plan: ChangePlan) -> list[Refusal]:
    """The drain (vLLM's ``shutdown-timeout``) must end before the restart command's limit.

    ``shutdown-timeout`` is how long vLLM drains on SIGTERM; the restart command waits for it
    (and for the service manager's hard stop). A drain longer than ``restart_timeout_s`` would
    have the command killed as failed half-way, the server stopping or starting on its own.
    """
    options = read_yaml_options(plan.files[0].new_text, str(plan.files[0].path))
    drain = options.get("shutdown-timeout")
    if isinstance(drain, bool) or not isinstance(drain, int | float):
        return []
    if drain >= instance.restart_timeout_s:
        why = (
            f"shutdown-timeout ({drain:g} s) is not below restart_timeout_s "
            f"({instance.restart_timeout_s:g} s): the restart would time out while vLLM drains"
        )
        return [("drain", why)]
    return []


def refuse(refusals: list[Refusal]) -> ActuationRefused:
    """One error for every refusal (each in its ``refusals``); its guard is the first one's."""
    message = "; ".join(why for _, why in refusals)
    return ActuationRefused(message, refusals[0][0], refusals)
