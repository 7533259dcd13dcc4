"""One planning round: a workload summary and candidates in, predictions ranked out.

:func:`plan` is a pure function of its :class:`PlanRequest` (the same request, the same
report), CPU-bound and synchronous: the daemon runs it in a worker process
(:mod:`~daemon.whatif.worker`), the offline command directly. It synthesises the workload once
(one seed, the same arrivals for every candidate), predicts every candidate
(:mod:`~daemon.whatif.prediction`), ranks them by goodput over the payback horizon with the
restart's loss included (SLO attainment breaks ties), and picks the best one only when it beats
the setting in force by at least ``min_gain``: a change predicted to lose, or to win by less
than the model's error, is never picked.

Behind an admission gate (``PlanRequest.gate``) every replay goes through the gate, so the
prediction for the setting in force ("now") includes the refusals the gate makes now. The
setting in force is replayed at the cap in force. A candidate is replayed at the cap in force
(at most its ``max_num_seqs``) and with the gate open to its ``max_num_seqs`` (where a restart
leaves a gate that stood at the old value, before the fast loop steers it again), and keeps the
better: the fast loop moves
the cap after the change, and which cap it will settle on is not modelled. So that a restart
is never asked for what the gate alone could do, the setting in force is replayed with the
gate open too, and a candidate must beat the better of the two.

Two objectives: ``goodput`` (the gain is relative: 10% more requests per second within the
SLO) and ``slo_attainment`` (the share of requests within the SLO over the horizon, the
requests lost to the restart counted as misses; the gain is in points: 0.1 is 10 points).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from daemon.core.knobs import KNOBS
from daemon.whatif.candidates import TUNED, Setting
from daemon.whatif.characterisation import StepObservations
from daemon.whatif.errors import WhatIfError
from daemon.whatif.prediction import (
    GateModel,
    Prediction,
    Slo,
    predict,
    repriced,
    settings_of,
)
from daemon.whatif.profile_check import ProfileCheck, check_profile
from daemon.whatif.summary import WorkloadSummary
from daemon.whatif.synthesis import synthesise
from simulator.arrivals import Arrival
from simulator.errors import SimulatorError
from simulator.profiles import EngineProfile, load_profile
from simulator.settings import EngineSettings, SettingsError

# Every knob a policy names that the simulator's EngineSettings takes, besides the two a what-if
# varies (TUNED): held at its value in force, with the knob's type. Read from both, so that a
# knob added to the catalogue and modelled by the simulator is held here without a line.
MODELED_KNOBS: dict[str, type] = {
    setting.name: KNOBS[setting.name].kind
    for setting in fields(EngineSettings)
    if setting.name in KNOBS and setting.name not in TUNED
}


Objective = Literal["goodput", "slo_attainment"]

# How far apart, in points of share, the gate's refusals in the replay of "now" and those it
# made over the window may be before the round says its workload does not fit the window.
_REFUSALS_AGREE = 0.1


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """Everything one planning round needs (picklable: it goes to the worker).

    Attributes:
        summary: The workload.
        profile: The engine profile: a shipped name or a file.
        current: The setting in force.
        candidates: The settings to compare (the one in force among them or not).
        held: Other knobs in force that the simulator models, as (name, value).
        steps: The live step observations, for the profile check.
        slo: The objectives a request must meet.
        simulated_s: Seconds of synthetic workload per candidate.
        horizon_s: Seconds over which a restart's downtime is paid back.
        min_gain: Least predicted gain (a share) for a change to be picked.
        seed: Seed of the synthetic workload.
        objective: What candidates are ranked by (the module docstring).
        gate: The admission gate in front of the instance, or None without one.
    """

    summary: WorkloadSummary
    profile: str
    current: Setting
    candidates: tuple[Setting, ...]
    held: tuple[tuple[str, float], ...] = ()
    steps: StepObservations | None = None
    slo: Slo = field(default_factory=Slo)
    simulated_s: float = 300.0
    horizon_s: float = 3600.0
    min_gain: float = 0.05
    seed: int = 0
    objective: Objective = "goodput"
    gate: GateModel | None = None


@dataclass(frozen=True, slots=True)
class WhatIfReport:
    """The answer of one planning round.

    Attributes:
        request: What was asked.
        profile_check: Whether the profile matches the live step rate.
        current: The prediction for the setting in force.
        ranked: Every candidate's prediction, best first.
        pick: The setting to move to, or None to keep the one in force.
        reason: Why, in a sentence.
        notes: Candidates left out and other things worth knowing.
        cpu_s: CPU seconds the round took (in the process that ran it).
        gate_open: Behind a gate whose cap is below ``max_num_seqs``: the setting in force
            with the gate open to it, the least a restart must beat; else None.
    """

    request: PlanRequest
    profile_check: ProfileCheck
    current: Prediction
    ranked: tuple[Prediction, ...]
    pick: Setting | None
    reason: str
    notes: tuple[str, ...]
    cpu_s: float
    gate_open: Prediction | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping: ``whatif --json`` prints it."""
        request = self.request
        return {
            "instance": request.summary.instance,
            "workload": request.summary.to_json(),
            "profile": request.profile,
            "slo": {"ttft_s": request.slo.ttft_s, "tpot_s": request.slo.tpot_s},
            "simulated_s": request.simulated_s,
            "horizon_s": request.horizon_s,
            "min_gain": request.min_gain,
            "objective": request.objective,
            "gate": None if request.gate is None else request.gate.to_json(),
            "current": self.current.to_json(),
            "gate_open": None if self.gate_open is None else self.gate_open.to_json(),
            "candidates": [prediction.to_json() for prediction in self.ranked],
            "pick": None if self.pick is None else self.pick.as_knobs(),
            "reason": self.reason,
            "profile_check": self.profile_check.to_json(),
            "notes": list(self.notes),
            "cpu_s": round(self.cpu_s, 3),
        }


def plan(request: PlanRequest) -> WhatIfReport:
    """Predict every candidate and pick (see the module docstring).

    Raises:
        WhatIfError: the profile does not load, or the setting in force is one vLLM refuses.
    """
    started = time.process_time()
    named = _profile(request.profile)
    check = check_profile(named, request.steps, request.summary)
    # A busy server the profile disagrees with is planned on the profile refit to it.
    profile = check.refit_profile or named
    base = _base_settings(profile, request)
    arrivals = synthesise(request.summary, request.simulated_s, request.seed)
    replay = _Replays(profile, base, arrivals, request)
    predictions, notes = _predictions(replay, base, request)
    current = next(p for p in predictions if p.current)
    gate_open = _gate_open(replay, request)
    ranked = sorted(
        predictions,
        key=lambda p: (score(p, request.objective), p.slo_attainment, p.goodput_tok_s),
        reverse=True,
    )
    baseline = current
    if gate_open is not None and score(gate_open, request.objective) > score(
        current, request.objective
    ):
        baseline = gate_open
        notes.append(
            f"the setting in force with its gate open to {gate_open.gate_cap} is predicted to"
            f" serve {gate_open.goodput_rps:.2f} req/s within the SLO against"
            f" {current.goodput_rps:.2f} at the cap in force ({current.gate_cap}): the gate"
            " alone could do that, so a restart must beat it"
        )
    notes.extend(_gate_mismatch(current, request.summary))
    pick, reason = _pick(ranked[0], baseline, request.min_gain, request.objective)
    return WhatIfReport(
        request=request,
        profile_check=check,
        current=current,
        ranked=tuple(ranked),
        pick=pick,
        reason=reason,
        notes=tuple(notes),
        cpu_s=time.process_time() - started,
        gate_open=gate_open,
    )


def _predictions(
    replay: _Replays, base: EngineSettings, request: PlanRequest
) -> tuple[list[Prediction], list[str]]:
    """Every candidate's prediction, and the candidates left out, with why."""
    notes: list[str] = []
    predictions: list[Prediction] = []
    by_budget = sorted(
        {*request.candidates, request.current},
        key=lambda s: (s.max_num_batched_tokens, s.max_num_seqs),
    )
    for setting in by_budget:
        in_force = setting == request.current
        try:
            settings_of(base, setting)
        except SettingsError as exc:
            notes.append(f"{setting.label()} left out: vLLM would refuse it ({exc})")
            continue
        gate = request.gate
        if gate is None:
            predictions.append(replay.served(setting, None, current=in_force))
            continue
        capped = replay.served(setting, min(gate.cap, setting.max_num_seqs), current=in_force)
        if in_force or capped.gate_cap == setting.max_num_seqs:
            predictions.append(capped)
            continue
        opened = replay.served(setting, setting.max_num_seqs, current=False)
        predictions.append(max(capped, opened, key=lambda p: (p.objective, p.slo_attainment)))
    return predictions, notes


def _gate_open(replay: _Replays, request: PlanRequest) -> Prediction | None:
    """The setting in force with its gate open to ``max_num_seqs``; None when it is already."""
    gate, setting = request.gate, request.current
    if gate is None or gate.cap >= setting.max_num_seqs:
        return None
    return replay.served(setting, setting.max_num_seqs, current=True)


def _gate_mismatch(current: Prediction, summary: WorkloadSummary) -> list[str]:
    """A note when the replay of "now" refuses a share unlike the one the gate refused."""
    demand = summary.gate
    if demand is None or current.gate_cap is None or current.requests == 0 or not summary.rate_rps:
        return []
    replayed = current.gate_refused / current.requests
    observed = demand.refused_rps / summary.rate_rps
    if abs(replayed - observed) <= _REFUSALS_AGREE:
        return []
    return [
        f"the replay of the setting in force refuses {replayed:.0%} at the gate where the gate"
        f" refused {observed:.0%} over the window: the steady synthetic workload does not match"
        " the window (did the traffic or the gate's cap change within it?), so trust these"
        " predictions less"
    ]


class _Replays:
    """Replays of one workload, each run only once where two settings would run the same."""

    def __init__(
        self,
        profile: EngineProfile,
        base: EngineSettings,
        arrivals: list[Arrival],
        request: PlanRequest,
    ) -> None:
        self._profile = profile
        self._base = base
        self._arrivals = arrivals
        self._request = request
        # Without a gate, per token budget from the smallest sequence cap up: once a cap never
        # bound (fewer requests were ever inside), every larger one serves the same. Behind a
        # gate at cap c no more than c requests are inside vLLM, so every max_num_seqs of at
        # least c serves the same: one run per (budget, cap).
        self._unbound: dict[int, Prediction] = {}
        self._gated: dict[tuple[int, int], Prediction] = {}

    def served(self, setting: Setting, cap: int | None, *, current: bool) -> Prediction:
        """``setting``'s prediction behind a gate at ``cap`` (None: no gate)."""
        request, budget = self._request, setting.max_num_batched_tokens
        same = self._unbound.get(budget) if cap is None else self._gated.get((budget, cap))
        if same is not None and (cap is not None or same.peak_in_engine < setting.max_num_seqs):
            return repriced(
                same, setting, profile=self._profile, horizon_s=request.horizon_s, current=current
            )
        gate = None
        if cap is not None:
            assert request.gate is not None
            gate = GateModel(cap, request.gate.queue_timeout_s)
        prediction = predict(
            self._profile,
            self._base,
            setting,
            self._arrivals,
            duration_s=request.simulated_s,
            slo=request.slo,
            horizon_s=request.horizon_s,
            current=current,
            gate=gate,
        )
        if cap is not None:
            self._gated[(budget, cap)] = prediction
        elif prediction.peak_in_engine < setting.max_num_seqs:
            self._unbound[budget] = prediction
        return prediction


def _profile(name: str) -> EngineProfile:
    try:
        return load_profile(name)
    except SimulatorError as exc:
        message = f"the engine profile {name!r} does not load: {exc}"
        raise WhatIfError(message) from exc


def _base_settings(profile: EngineProfile, request: PlanRequest) -> EngineSettings:
    held = {
        name: MODELED_KNOBS[name](value) for name, value in request.held if name in MODELED_KNOBS
    }
    try:
        return EngineSettings.defaults(profile, **held, **request.current.as_knobs())
    except SettingsError as exc:
        message = f"the settings in force are ones vLLM would refuse: {exc}"
        raise WhatIfError(message) from exc


def score(prediction: Prediction, objective: Objective) -> float:
    """A candidate's value under ``objective`` over the horizon, the restart's loss included."""
    if objective == "goodput":
        return prediction.objective
    # The same arrivals for every candidate: the horizon's goodput over the arrival rate is the
    # share of requests within the SLO, those lost to the restart counted as misses.
    rate = prediction.arrival_rps
    return prediction.objective / rate if rate > 0 else 0.0


def gain(best: Prediction, current: Prediction, objective: Objective) -> float:
    """``best``'s predicted gain over ``current``: relative for goodput, in points otherwise."""
    if objective == "slo_attainment":
        return score(best, objective) - score(current, objective)
    if current.objective > 0:
        return best.objective / current.objective - 1
    return math.inf if best.objective > 0 else 0.0


def _pick(
    best: Prediction, current: Prediction, min_gain: float, objective: Objective = "goodput"
) -> tuple[Setting | None, str]:
    if best.current:
        return None, "keep: the setting in force is predicted best"
    won = gain(best, current, objective)
    if objective == "slo_attainment":
        shown, least = f"{won * 100:+.1f} points", f"{min_gain * 100:g} points"
        what = "SLO attainment"
    else:
        shown = "from none" if math.isinf(won) else f"{won:+.1%}"
        what, least = "goodput", f"{min_gain:.0%}"
    # A change must win, whatever min_gain says: with min_gain 0 a tie on the objective
    # (ranked first by a tie-break) would restart vLLM for a predicted nothing.
    if won < min_gain or won <= 0:
        return None, (
            f"keep: the best candidate, {best.setting.label()}, gains {shown} of {what} after"
            f" its restart, less than the {least} a change must win"
        )
    return best.setting, (
        f"{best.setting.label()}: {what} {shown} over the {_in_force(current, objective)} in"
        f" force, after {best.restart_downtime_s:.0f} s down to restart"
        f" (~{best.requests_lost_to_restart:.0f} requests lost)"
    )


def _in_force(current: Prediction, objective: Objective) -> str:
    if objective == "slo_attainment":
        return f"{score(current, objective):.1%}"
    return f"{current.objective:.2f} req/s"
