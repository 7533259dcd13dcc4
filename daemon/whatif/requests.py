"""A :class:`~daemon.whatif.planning.PlanRequest` for one configured instance.

Shared by the daemon's control handler and the offline command, so that both ask the same
question: the setting in force as the server's files say (the actuator reads them), the
candidates inside the instance's envelopes, the other modelled knobs held, and the gate in
front of it (its cap from its stats, its queue timeout from ``[vllm.gate]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from daemon.core.settings import VllmInstance
from daemon.whatif.candidates import TUNED, Setting, candidate_grid, within_one_step
from daemon.whatif.characterisation import StepObservations
from daemon.whatif.errors import WhatIfError
from daemon.whatif.planning import MODELED_KNOBS, Objective, PlanRequest
from daemon.whatif.prediction import GateModel, Slo
from daemon.whatif.summary import WorkloadSummary
from simulator.errors import SimulatorError
from simulator.profiles import load_profile

DEFAULT_PROFILE = "llama-3.1-8b-h100-tp1"
"""The profile assumed when none is named: the shipped 8B on one H100, as ``simulate``."""


@dataclass(frozen=True, slots=True)
class Question:
    """What a person (the CLI's options) or a tune policy may choose about a what-if.

    Attributes:
        knobs: The knobs that may move; one left out stays at its value in force.
        one_step: Only candidates within each knob's ``max_step`` of the value in force, so
            that the planner moves to the pick exactly (a tune policy's round asks this).
    """

    profile: str = DEFAULT_PROFILE
    slo: Slo = field(default_factory=Slo)
    simulated_s: float = 300.0
    horizon_s: float = 3600.0
    min_gain: float = 0.05
    objective: Objective = "goodput"
    knobs: tuple[str, ...] = TUNED
    one_step: bool = False


def plan_request(
    instance: VllmInstance,
    summary: WorkloadSummary,
    steps: StepObservations | None,
    in_force: Mapping[str, float],
    question: Question,
) -> tuple[PlanRequest, list[str]]:
    """The request, and notes on what was assumed.

    Raises:
        WhatIfError: the profile does not load.
    """
    notes: list[str] = []
    current = _in_force(instance, in_force, question.profile, notes)
    envelopes = {knob: instance.knobs[knob] for knob in question.knobs if knob in instance.knobs}
    notes.extend(
        f"{knob}: no envelope in the configuration, held at {current.as_knobs()[knob]}"
        for knob in question.knobs
        if knob not in envelopes
    )
    candidates = candidate_grid(current, envelopes)
    if question.one_step:
        candidates = [c for c in candidates if within_one_step(c, current, envelopes)]
    held = tuple((name, value) for name, value in in_force.items() if name in MODELED_KNOBS)
    request = PlanRequest(
        summary=summary,
        profile=question.profile,
        current=current,
        candidates=tuple(candidates),
        held=held,
        steps=steps,
        slo=question.slo,
        simulated_s=question.simulated_s,
        horizon_s=question.horizon_s,
        min_gain=question.min_gain,
        objective=question.objective,
        gate=_gate(instance, summary, notes),
    )
    return request, notes


def _gate(instance: VllmInstance, summary: WorkloadSummary, notes: list[str]) -> GateModel | None:
    """The gate to replay: its cap at the end of the window and its configured queue timeout."""
    if not instance.gate.enabled:
        return None
    demand = summary.gate
    if demand is None:
        notes.append(
            "the gate's counters are missing from the window (is HAProxy up?): the workload is"
            " what vLLM admitted, without the gate's queue and refusals, and no gate is replayed"
        )
        return None
    if demand.cap is None:
        notes.append("the gate has no cap (maxconn): it is not replayed")
        return None
    return GateModel(max(demand.cap, 1), instance.gate.queue_timeout_s)


def _in_force(
    instance: VllmInstance, in_force: Mapping[str, float], profile_name: str, notes: list[str]
) -> Setting:
    if all(knob in in_force for knob in TUNED):
        return Setting(int(in_force["max_num_seqs"]), int(in_force["max_num_batched_tokens"]))
    try:
        profile = load_profile(profile_name)
    except SimulatorError as exc:
        message = f"the engine profile {profile_name!r} does not load: {exc}"
        raise WhatIfError(message) from exc
    seqs = int(in_force.get("max_num_seqs", profile.default_max_num_seqs))
    tokens = int(in_force.get("max_num_batched_tokens", profile.default_max_num_batched_tokens))
    where = "its config_path" if instance.config_path is not None else "no config_path"
    notes.append(
        f"the setting in force is not fully known ({where}); vLLM's defaults on"
        f" {profile.name} fill the gaps: {seqs}x{tokens}"
    )
    return Setting(seqs, tokens)
