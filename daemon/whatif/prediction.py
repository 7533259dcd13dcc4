"""One candidate setting's predicted service of a synthetic workload, in virtual time.

The arrivals are replayed through the simulated engine (:class:`simulator.virtual_time.\
VirtualRun`) with the instance's profile and the candidate's settings, for the workload's
duration plus a grace period in which what is still inside may finish; a request unfinished by
then is a miss. A request meets the SLO when it completed within both objectives (as
:func:`simulator.report.meets_slo` judges, with the objectives given here).

Behind an admission gate (:class:`GateModel`) the arrivals go through the simulator's own gate
(:class:`simulator.gate.Gate`, as ``simulate`` builds gated runs): at most ``cap`` requests
inside the engine, the rest waiting in a FIFO queue for at most the gate's queue timeout, then
refused (a miss). The wait counts in TTFT, as a client sees it.

The restart that moving to a candidate costs is priced over a payback horizon: vLLM is down for
the profile's ``restart_downtime_s`` of the candidate (longer with more CUDA graphs to capture),
and the requests that arrive meanwhile are lost. The objective is the goodput over the horizon:
``goodput_rps * (horizon - downtime) / horizon``; the setting in force pays nothing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from daemon.whatif.candidates import Setting
from simulator.arrivals import Arrival
from simulator.engine import Engine
from simulator.gate import Gate
from simulator.profiles import EngineProfile
from simulator.report import TPOT_SLO_S, TTFT_SLO_S, percentile
from simulator.requests import FinishedRequest, Outcome
from simulator.settings import EngineSettings
from simulator.virtual_time import VirtualRun


@dataclass(frozen=True, slots=True)
class Slo:
    """The per-request objectives: TTFT and TPOT at most these (the simulator's by default)."""

    ttft_s: float = TTFT_SLO_S
    tpot_s: float = TPOT_SLO_S

    def met_by(self, record: FinishedRequest) -> bool:
        """Whether one request completed within both objectives."""
        if record.outcome is not Outcome.COMPLETED or record.ttft_s is None:
            return False
        return record.ttft_s <= self.ttft_s and (
            record.tpot_s is None or record.tpot_s <= self.tpot_s
        )


@dataclass(frozen=True, slots=True)
class GateModel:
    """The admission gate in front of the instance, as a what-if replays it.

    Attributes:
        cap: The cap in force (HAProxy's ``maxconn`` for the server).
        queue_timeout_s: HAProxy's ``timeout queue``: the longest wait before a 503.
    """

    cap: int
    queue_timeout_s: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {"cap": self.cap, "queue_timeout_s": self.queue_timeout_s}


@dataclass(frozen=True, slots=True)
class Prediction:
    """What one setting would do with the workload.

    Attributes:
        setting: The candidate.
        current: Whether it is the setting in force.
        requests: Requests in the synthetic workload.
        arrival_rps: Their rate.
        slo_attainment: Share of them that met the SLO.
        goodput_rps: Requests per second that met it, over the workload's duration.
        goodput_tok_s: Their output tokens per second.
        ttft_p95_s: 95th percentile TTFT of completed requests, or None.
        tpot_p95_s: 95th percentile TPOT of completed requests, or None.
        preemptions: Preemptions over the run.
        peak_in_engine: Most requests inside the engine (running or waiting) at once: below
            ``max_num_seqs`` the cap never bound, so any larger cap would have run the same.
        restart_downtime_s: Seconds down to restart into it (0 for the setting in force).
        requests_lost_to_restart: Requests arriving while it is down.
        objective: Goodput over the payback horizon, the restart's loss included.
        gate_cap: The gate's cap in the replay, or None without a gate.
        gate_refused: Requests the gate refused (queue timeouts) in the replay.
    """

    setting: Setting
    current: bool
    requests: int
    arrival_rps: float
    slo_attainment: float
    goodput_rps: float
    goodput_tok_s: float
    ttft_p95_s: float | None
    tpot_p95_s: float | None
    preemptions: int
    peak_in_engine: int
    restart_downtime_s: float
    requests_lost_to_restart: float
    objective: float
    gate_cap: int | None = None
    gate_refused: int = 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            **self.setting.as_knobs(),
            "current": self.current,
            "requests": self.requests,
            "slo_attainment": round(self.slo_attainment, 4),
            "goodput_rps": round(self.goodput_rps, 4),
            "goodput_tok_s": round(self.goodput_tok_s, 1),
            "ttft_p95_s": _maybe(self.ttft_p95_s),
            "tpot_p95_s": _maybe(self.tpot_p95_s),
            "preemptions": self.preemptions,
            "peak_in_engine": self.peak_in_engine,
            "restart_downtime_s": round(self.restart_downtime_s, 2),
            "requests_lost_to_restart": round(self.requests_lost_to_restart, 1),
            "objective_goodput_rps": round(self.objective, 4),
            "gate_cap": self.gate_cap,
            "gate_refused": self.gate_refused,
        }


def predict(
    profile: EngineProfile,
    base: EngineSettings,
    setting: Setting,
    arrivals: Sequence[Arrival],
    *,
    duration_s: float,
    slo: Slo,
    horizon_s: float,
    current: bool,
    gate: GateModel | None = None,
) -> Prediction:
    """Replay ``arrivals`` with ``setting`` over ``base``, behind ``gate`` if one is given.

    See the module docstring.
    """
    gated = None if gate is None else Gate[Arrival](gate.cap, gate.queue_timeout_s)
    run = VirtualRun(Engine(profile, settings_of(base, setting)), arrivals, gate=gated)
    run.run(duration_s + max(60.0, duration_s / 2))
    good = [record for record in run.finished if slo.met_by(record)]
    completed = [r for r in run.finished if r.outcome is Outcome.COMPLETED]
    requests = len(arrivals)
    served = Prediction(
        setting=setting,
        current=True,
        requests=requests,
        arrival_rps=requests / duration_s,
        slo_attainment=len(good) / requests if requests else 0.0,
        goodput_rps=len(good) / duration_s,
        goodput_tok_s=sum(r.output_tokens for r in good) / duration_s,
        ttft_p95_s=percentile([r.ttft_s for r in completed if r.ttft_s is not None], 0.95),
        tpot_p95_s=percentile([r.tpot_s for r in completed if r.tpot_s is not None], 0.95),
        preemptions=run.engine.lifetime_totals(run.now).preemptions,
        peak_in_engine=_peak(arrivals, run.finished),
        restart_downtime_s=0.0,
        requests_lost_to_restart=0.0,
        objective=len(good) / duration_s,
        gate_cap=None if gated is None else gated.cap,
        gate_refused=0 if gated is None else gated.timed_out,
    )
    return repriced(served, setting, profile=profile, horizon_s=horizon_s, current=current)


def repriced(
    served: Prediction,
    setting: Setting,
    *,
    profile: EngineProfile,
    horizon_s: float,
    current: bool,
) -> Prediction:
    """``served`` as the prediction of ``setting``: the same service, its own restart's cost.

    For a setting that would have served the workload exactly as ``served`` did (a larger
    ``max_num_seqs`` where the cap never bound), and for :func:`predict` itself.
    """
    downtime = 0.0 if current else profile.restart_downtime_s(*_pair(setting))
    return dataclasses.replace(
        served,
        setting=setting,
        current=current,
        restart_downtime_s=downtime,
        requests_lost_to_restart=served.arrival_rps * downtime,
        objective=served.goodput_rps * max(horizon_s - downtime, 0.0) / horizon_s,
    )


def settings_of(base: EngineSettings, setting: Setting) -> EngineSettings:
    """``base`` with the candidate's two knobs.

    Raises:
        SettingsError: vLLM would refuse the pair.
    """
    return EngineSettings(**{**_fields(base), **setting.as_knobs()})


def _peak(arrivals: Sequence[Arrival], finished: Sequence[FinishedRequest]) -> int:
    """Most requests inside the engine at once; the unfinished stay to the end."""
    events = sorted(
        [(arrival.arrived_at, 1) for arrival in arrivals]
        + [(record.finished_at, -1) for record in finished]
    )
    inside = peak = 0
    for _, change in events:
        inside += change
        peak = max(peak, inside)
    return peak


def _pair(setting: Setting) -> tuple[int, int]:
    return setting.max_num_seqs, setting.max_num_batched_tokens


def _fields(settings: EngineSettings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in settings.__dataclass_fields__}


def _maybe(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 4)
