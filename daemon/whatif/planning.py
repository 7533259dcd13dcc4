"""One planning round: a workload summary and candidates in, predictions ranked out.

:func:`plan` is a pure function of its :class:`PlanRequest` (the same request, the same
report), CPU-bound and synchronous: the daemon runs it in a worker process
(:mod:`~daemon.whatif.worker`), the offline command directly. It synthesises the workload once
(one seed, the same arrivals for every candidate), predicts every candidate
(:mod:`~daemon.whatif.prediction`), ranks them by goodput over the payback horizon with the
restart's loss included (SLO attainment breaks ties), and picks the best one only when it beats
the setting in force by at least ``min_gain``: a change predicted to lose, or to win by less
than the model's error, is never picked.

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
from daemon.whatif.prediction import Prediction, Slo, predict, repriced, settings_of
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
    """

    request: PlanRequest
    profile_check: ProfileCheck
    current: Prediction
    ranked: tuple[Prediction, ...]
    pick: Setting | None
    reason: str
    notes: tuple[str, ...]
    cpu_s: float

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
            "current": self.current.to_json(),
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
    profile = _profile(request.profile)
    base = _base_settings(profile, request)
    arrivals = synthesise(request.summary, request.simulated_s, request.seed)
    predictions, notes = _predictions(profile, base, arrivals, request)
    current = next(p for p in predictions if p.current)
    ranked = sorted(
        predictions,
        key=lambda p: (score(p, request.objective), p.slo_attainment, p.goodput_tok_s),
        reverse=True,
    )
    pick, reason = _pick(ranked[0], current, request.min_gain, request.objective)
    return WhatIfReport(
        request=request,
        profile_check=check_profile(profile, request.steps, request.summary),
        current=current,
        ranked=tuple(ranked),
        pick=pick,
        reason=reason,
        notes=tuple(notes),
        cpu_s=time.process_time() - started,
    )


def _predictions(
    profile: EngineProfile, base: EngineSettings, arrivals: list[Arrival], request: PlanRequest
) -> tuple[list[Prediction], list[str]]:
    """Every candidate's prediction, and the candidates left out, with why."""
    notes: list[str] = []
    predictions: list[Prediction] = []
    # Per token budget, from the smallest sequence cap up: once a cap never bound (fewer
    # requests were ever inside), every larger one serves the same, and only its restart's
    # cost differs; its run is not repeated.
    unbound: dict[int, Prediction] = {}
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
        same = unbound.get(setting.max_num_batched_tokens)
        if same is not None:
            predictions.append(
                repriced(
                    same, setting, profile=profile, horizon_s=request.horizon_s, current=in_force
                )
            )
            continue
        prediction = predict(
            profile,
            base,
            setting,
            arrivals,
            duration_s=request.simulated_s,
            slo=request.slo,
            horizon_s=request.horizon_s,
            current=in_force,
        )
        predictions.append(prediction)
        if prediction.peak_in_engine < setting.max_num_seqs:
            unbound[setting.max_num_batched_tokens] = prediction
    return predictions, notes


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
