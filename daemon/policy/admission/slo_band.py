"""The governor's own admission controller: an SLO band, cut by the gradient, grown by demand.

The limiters of the literature look for the knee of the latency curve. An operator has a
target instead (TTFT and TPOT per request, the policy's own), and a burst must be absorbed in
seconds. So this controller keeps vLLM inside a band below its SLO:

- **Pressure** is the worst ratio of what vLLM shows to its budget: ``ttft_p95 / ttft_target``,
  ``tpot_p95 / tpot_target`` and ``preemptions / preemption_limit``. The TTFT budget is the
  part of the SLO left once a request has waited at the gate (SLO 2 s, gate wait up to the
  queue timeout: 1 s of TTFT inside vLLM by default); TTFT and TPOT are measured inside
  vLLM, so a longer queue at the gate never reads as congestion inside it. While nothing
  queues at the gate the budget is the SLO itself (``ttft_slo_s``, when given): no request
  spends any of it at the gate, and a TTFT p95 between the two meets the SLO. Cutting there
  made the gate bind and turned requests away that static-default served in time (a 70B at
  0.8 of its capacity, cut 1024 -> 47 at 1.05x the 1.5 s target). The gate's refusals do
  not tighten it: a refused request never reaches vLLM's TTFT.
- **Cut** when the pressure is above 1, by the gradient ``1 / pressure`` (between x0.5 and
  x0.9), applied to what is *in flight*, not to the cap: a cap far above the load binds
  nothing, and cutting it by 10% would take many ticks to matter. A 3x burst that breaks the
  SLO is therefore capped within one tick. A further cut waits ``cut_dwell_s`` and comes only
  if the pressure has stopped easing.
- **Settle**: the latency quantiles cover the last ``settle_s`` (the 60 s signal window) of
  completed requests, so for that long after a cut they still show requests admitted before
  it. Cutting on them again and again would drive the cap to its floor (a 1.2x burst did, on
  the proof benchmark: 359 in flight to 4 in 40 s, then 503s for minutes). So within
  ``settle_s`` of the first cut of an episode the cap goes no lower than ``max_cut`` of what
  was in flight then: one halving per window at most, the concurrency that keeps vLLM's
  throughput. A new window allows another halving if the pressure still says so.
- **Grow** when the pressure is below ``low_water`` (a hysteresis band, so the cap does not
  flap around the target) and there is demand at the gate (requests queued, refused by the
  queue timeout, or as many in flight as the cap allows): by the queue length, at most
  ``max_growth`` of the cap per step and one step per ``grow_dwell_s``, and not within
  ``settle_s`` of a cut: until the window shows only requests admitted under the cut, a low
  pressure says nothing about the old cap. Growth is paced to the window (10% per 5 s, about
  3x a minute) because the pressure shows a raise only a window later; a faster growth
  overshoots and is cut again, the oscillation the proof's first run showed (4 <-> ~250).
  Without demand the cap stays where it is: latency measured on a light load says nothing
  about a heavier one. Inside the band it grows too, at the same pace, while the gate turns
  requests away at a cap below the calm load (below): a refused request is a certain miss,
  and the server kept its latency in budget at more (a 70B cut to 4 by long prompts sat
  inside its band for the rest of the day, refusing requests that static-default served
  within the SLO). Not above the calm load: after a burst's cut, growing inside the band
  only let the burst back in to be cut again (the 8B proof lost 0.4 points of SLO).
- **Hold** otherwise, and whenever a signal it needs is stale or missing. A pressure above 1
  with no more requests in flight and queued than ``min_cap`` is the window remembering a
  burst that has left: no cut (even the lowest cap would admit them all). Nor when a cap below
  ``max_cap`` (one this controller set) binds nothing, with less than ``max_cut`` of it in
  flight and queued: in that unsaturated state the latency is not the concurrency the cap
  admits, and a cut only trades TTFT inside vLLM for a wait at the gate, then meets the next
  burst too low (a 70B cut 40 -> 6 with 7 in flight, six seconds before a 2.5x burst).
- **Evidence** before a TTFT cut: the load (in flight and queued) must have grown by
  ``load_growth``, and by ``min_cap`` requests at least, over the **calm load**: the requests
  in flight averaged over about a window of ticks with the pressure in its band and nobody
  waiting at the gate (the demand itself, not what a cap let through). TTFT over budget at a
  load the server served within budget minutes before is the requests (long prompts), not
  the concurrency: a cut only moves their wait to the gate. A burst, or an overload that
  makes requests pile up inside vLLM, raises the load and is cut as before. TPOT needs no
  such evidence at first: a smaller batch shortens every decode step (on the 8B's day of
  4k-token code prompts, cuts from 145 in flight to 28 on TPOT kept 8 points of SLO), unless
  its prefills are what stall the steps (the 70B's same day at a few in flight): the give-back
  below finds that out, and then asks the same evidence. Preemptions are cut without it: a
  smaller batch frees KV at any load. A load is remembered for ``calm_memory_s``.
- **Give back** a window of cuts that relieved nothing: a settle window after its first cut the
  latency window holds only requests admitted under the cuts; if the pressure has not eased
  by ``easing`` of what it was at that first cut while the gate queues or refuses, the latency
  is not the concurrency the gate admits (long prompts at a light load: a 70B cut 1024 -> 4
  with 19 in flight kept its TTFT at 1.37x) and the cuts only turn requests away. The cap goes
  back to where the window found it, and no cut comes until the pressure is back in its band.
  Cutting at the load of the window's first cut was shown to relieve nothing: the next TTFT or
  TPOT cut needs the load to grow beyond it, as above (on a 70B's day of long prompts, cuts at
  5-10 in flight came every minute or two, each given back).
- **Judge** every window of cuts a settle window after its first, whatever the pressure: if
  vLLM then generates fewer tokens *and* is let fewer requests, both by more than
  ``max_pace_loss``, while the gate turns requests away, the cuts only throttled a server with
  room to spare (:mod:`daemon.policy.admission.pace`) and are given back as above. The
  pressure cannot tell: refusing requests lowers the latency of the ones let in (clumps of
  chat cut a 70B to 6, refusing a third of its requests at a pressure of 0.3).
- **Grow over budget** when the evidence says the latency is the requests, not the load (the
  load has not grown over the calm load or the futile one, or is under ``min_cap``), while the
  cap binds and the gate turns requests away: the cap relieves none of that latency, and each
  refusal is a certain miss. It grows as below the band, at the same pace.

The cap never leaves ``[min_cap, max_cap]``; ``max_cap`` is vLLM's ``max-num-seqs``, so the
gate never admits more than vLLM runs at once and vLLM's own waiting queue (unbounded, no
timeout) stays empty. Lasting moves of the cap are the slow loop's cue: a cap far below
``max-num-seqs`` for long suggests a smaller ``max-num-seqs`` (a restart, approved), one pinned
at it with KV headroom a larger one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar, NamedTuple

from daemon.policy.admission.pace import Pace
from daemon.policy.admission.signals import (
    AdmissionSignals,
    Step,
    check_controller,
    decide,
    hold,
    hold_without,
)

COUNTED_FOR_INTAKE = 100
"""Requests a window must count before its intake can be said to have held (about +-10%)."""


@dataclass(frozen=True, slots=True)
class SloBandState:
    """What the controller remembers between ticks.

    Attributes:
        last_cut_at: When it last cut the cap (loop clock), or None.
        last_grow_at: When it last raised the cap, or None.
        pressure_ref: The pressure at the last cut, lowered while it eases; a further cut
            needs the pressure to stop easing below it.
        episode_at: When the first cut of the current settle window came, or None.
        episode_floor: The lowest cap of that window (``max_cut`` of what was in flight).
        episode_cap: The cap before the window's first cut.
        episode_pressure: The pressure at the window's first cut.
        episode_load: The load (in flight and queued) at the window's first cut.
        episode_pace: vLLM's pace at the window's first cut (None: unknown).
        futile: A window of cuts relieved nothing: no cut until the pressure is back in its band.
        calm_load: The requests in flight while the pressure was inside its band and nobody
            waited at the gate, averaged over about one window (``settle_s``), or None.
        calm_at: The last tick that load was updated.
        futile_load: The load at the first cut of the last window of cuts given back, or None.
        futile_at: When they were given back.
        judge_at: When the window of cuts still to be judged began, or None.
        judge_cap: The cap before that window.
        judge_pace: vLLM's pace over the window before it (None: unknown, never judged).
    """

    last_cut_at: float | None = None
    last_grow_at: float | None = None
    pressure_ref: float | None = None
    episode_at: float | None = None
    episode_floor: float = 0.0
    episode_cap: float | None = None
    episode_pressure: float | None = None
    episode_load: float = 0.0
    futile: bool = False
    calm_load: float | None = None
    calm_at: float | None = None
    futile_load: float | None = None
    futile_at: float | None = None
    judge_at: float | None = None
    judge_cap: float | None = None
    judge_pace: Pace | None = None
    episode_pace: Pace | None = None


@dataclass(frozen=True, slots=True)
class SloBand:
    """The SLO-band controller.

    Attributes:
        min_cap: Lowest cap.
        max_cap: Highest cap (vLLM's max-num-seqs).
        ttft_target_s: TTFT p95 budget inside vLLM (the SLO minus the wait at the gate).
        ttft_slo_s: The TTFT SLO: the budget while nothing waits at the gate (None: always
            ``ttft_target_s``). At least ``ttft_target_s``.
        tpot_target_s: Budget for the p95 of each finished request's TPOT (per request, as
            the SLO judges it; the fast loop reads ``request_tpot_p95_s``).
        preemption_limit_per_s: Preemptions per second that count as full pressure.
        low_water: Pressure below which the cap may grow (0-1).
        max_cut: Deepest cut in one settle window, as a factor of what was in flight at its
            first cut (0.5: halve at most).
        max_growth: Largest growth in one step, as a share of the cap (at least 1).
        cut_dwell_s: Least time between two cuts.
        grow_dwell_s: Least time between two raises.
        settle_s: The latency signals' window: the cuts of one window go no deeper than
            ``max_cut`` together, and a raise waits this long after a cut.
        easing: A pressure below ``easing * pressure_ref`` is still easing: no further cut.
        load_growth: How much the load must have grown over the calm load (or over the load
            of cuts given back as futile) before a latency cut (1.25: by a quarter, and by
            ``min_cap`` requests at least).
        calm_memory_s: How long the calm load, and the load of futile cuts, count as
            evidence.
        max_pace_loss: How much slower vLLM may work a window after a cut (fewer tokens and
            fewer requests, each by this share) before the cut counts as throttling.
    """

    needs: ClassVar[tuple[str, ...]] = (
        "cap",
        "in_flight",
        "queued",
        "ttft_p95_s",
        "tpot_p95_s",
        "preemptions_per_s",
    )

    min_cap: int
    max_cap: int
    ttft_target_s: float = 1.0
    ttft_slo_s: float | None = None
    tpot_target_s: float = 0.08
    preemption_limit_per_s: float = 0.5
    low_water: float = 0.6
    max_cut: float = 0.5
    max_growth: float = 0.1
    cut_dwell_s: float = 5.0
    grow_dwell_s: float = 5.0
    settle_s: float = 60.0
    easing: float = 0.9
    load_growth: float = 1.25
    calm_memory_s: float = 600.0
    max_pace_loss: float = 0.2

    def __post_init__(self) -> None:
        check_controller(self.min_cap, self.max_cap, self.settle_s)
        positive = (self.ttft_target_s, self.tpot_target_s, self.preemption_limit_per_s)
        if min(positive) <= 0 or not 0 < self.low_water < 1 or not 0 < self.max_cut < 0.9:
            message = "slo-band needs positive targets, 0 < low_water < 1 and 0 < max_cut < 0.9"
            raise ValueError(message)
        if self.max_growth <= 0 or min(self.cut_dwell_s, self.grow_dwell_s, self.settle_s) < 0:
            message = "slo-band needs max_growth > 0 and non-negative dwell times"
            raise ValueError(message)
        if self.ttft_slo_s is not None and not self.ttft_slo_s >= self.ttft_target_s:
            message = "slo-band needs ttft_slo_s >= ttft_target_s (the SLO holds the target)"
            raise ValueError(message)
        if not 0 < self.max_pace_loss < 1:
            message = "slo-band needs 0 < max_pace_loss < 1"
            raise ValueError(message)
        if self.load_growth < 1 or self.calm_memory_s < 0:
            message = "slo-band needs load_growth >= 1 and a non-negative calm_memory_s"
            raise ValueError(message)

    @property
    def window_s(self) -> float:
        """Its signals are read over ``settle_s``: the window its pacing waits out."""
        return self.settle_s

    def initial_state(self) -> SloBandState:
        """Nothing done yet."""
        return SloBandState()

    def step(
        self, state: SloBandState, signals: AdmissionSignals, now: float
    ) -> Step[SloBandState]:
        """Cut above the band, grow below it when there is demand, else hold."""
        known = signals.known(self.needs)
        if known is None:
            return hold_without(state, signals.missing(self.needs))
        state, throttled = self._judge_cuts(state, known, signals, now)
        if throttled is not None:
            return throttled
        pressure, worst = self._pressure(known)
        if pressure <= 1 and not (known["queued"] > 0 or _refusing(signals)):
            state = self._calm(state, known["in_flight"], now)
        if pressure > 1:
            return self._over_budget(state, _Reading(known, signals, pressure, worst), now)
        if state.futile or state.episode_pressure is not None:
            # Back in its band: the cuts relieved the pressure, or it went of itself.
            state = replace(state, futile=False, episode_cap=None, episode_pressure=None)
        below_calm = self._below_calm(known["cap"], state, now)
        if pressure < self.low_water:
            return self._grow(
                state, known, signals, f"pressure {pressure:.2f} < {self.low_water}", now
            )
        if _refusing(signals) and below_calm:
            why = f"inside the band (pressure {pressure:.2f}), refusing below the calm load"
            return self._grow(state, known, signals, why, now)
        return hold(state, f"inside the band (pressure {pressure:.2f}, {worst})")

    def _calm(self, state: SloBandState, load: float, now: float) -> SloBandState:
        """Fold this calm tick's load into the calm load, averaged over one window.

        An average, not the last calm tick's load: the latency window lags the load, so while
        a burst ramps up the pressure still reads calm, and the last calm load would be the
        burst's own (the 8B proof's 3x bursts went uncut for seconds).
        """
        previous, then = state.calm_load, state.calm_at
        if previous is None or then is None or now - then > self.calm_memory_s:
            return replace(state, calm_load=load, calm_at=now)
        weight = 1.0 - math.exp(-max(0.0, now - then) / max(self.settle_s, 1e-9))
        return replace(state, calm_load=previous + (load - previous) * weight, calm_at=now)

    def _grow(
        self,
        state: SloBandState,
        known: dict[str, float],
        signals: AdmissionSignals,
        why: str,
        now: float,
    ) -> Step[SloBandState]:
        """Raise the cap by the queue, paced, when there is demand at the gate; ``why`` it may."""
        cap = known["cap"]
        refused = signals.gate_refusals_per_s or 0.0  # optional: more evidence of demand
        demand = known["queued"] > 0 or refused > 0 or known["in_flight"] >= cap
        if not demand:
            return hold(state, f"no demand at the gate ({why})")
        if state.last_cut_at is not None and now - state.last_cut_at < self.settle_s:
            return hold(state, "settling: the window still holds requests from before the cut")
        if state.last_grow_at is not None and now - state.last_grow_at < self.grow_dwell_s:
            return hold(state, "waiting for the last raise to show")
        growth = max(1.0, min(known["queued"], self.max_growth * cap))
        grown = replace(state, last_grow_at=now)
        reason = f"{why}, {known['queued']:g} queued"
        return decide(grown, cap, cap + growth, reason, min_cap=self.min_cap, max_cap=self.max_cap)

    def _pressure(self, known: dict[str, float]) -> tuple[float, str]:
        """The worst ratio to its budget; TTFT's is the SLO's while nobody queues at the gate.

        Requests the gate refused never reached vLLM, so they are not in its TTFT; only the
        ones admitted after a wait spent part of the SLO at the gate, and those waited in its
        queue. Tightening the budget on refusals too made a loop: a cap that bound on clumps
        of chat refused requests, the budget fell to the target, and the pressure cut the
        cap again (a 70B serving 89.6% of the chat alone ended at 60.6%, cut 1024 -> 4).
        """
        queueing = known["queued"] > 0
        ttft_budget = self.ttft_target_s if queueing else self.ttft_slo_s or self.ttft_target_s
        ratios = {
            "ttft_p95": known["ttft_p95_s"] / ttft_budget,
            "tpot_p95": known["tpot_p95_s"] / self.tpot_target_s,
            "preemptions": known["preemptions_per_s"] / self.preemption_limit_per_s,
        }
        worst = max(ratios, key=lambda name: ratios[name])
        return ratios[worst], worst

    def _over_budget(
        self, state: SloBandState, reading: _Reading, now: float
    ) -> Step[SloBandState]:
        """Give back futile cuts, hold, grow when the latency is not the load, or cut."""
        known, signals, _, worst = reading
        turned_away = _refusing(signals)
        undone = self._undo_futile(state, reading, now, turned_away=turned_away)
        if undone is not None:
            return undone
        why_not = self._no_cut(state, known, worst, now)
        if why_not is not None:
            return hold(state, why_not)
        not_the_load = self._not_the_load(state, known, worst, now)
        if not_the_load is None:
            return self._cut(state, reading, now)
        binds = known["queued"] > 0 or known["in_flight"] >= known["cap"]
        if turned_away and binds:
            # The latency is the requests, not the concurrency, so the cap relieves none of
            # it; what it does do is turn requests away, each a certain miss (a 70B cut to 5
            # by a clump of long prompts refused 0.1-0.8 requests/s for the rest of an
            # evening that static-default served). It grows as below the band.
            why = f"{not_the_load}; the gate turns requests away"
            return self._grow(state, known, signals, why, now)
        return hold(state, not_the_load)

    def _cut(self, state: SloBandState, reading: _Reading, now: float) -> Step[SloBandState]:
        known, signals, pressure, worst = reading
        reference = state.pressure_ref
        if reference is not None and pressure < self.easing * reference:
            eased = replace(state, pressure_ref=pressure)
            return hold(eased, f"{worst} over budget but easing ({pressure:.2f})")
        cap = known["cap"]
        factor = max(self.max_cut, min(0.9, 1 / pressure))
        base = min(cap, known["in_flight"])
        episode = state.episode_at is not None and now - state.episode_at < self.settle_s
        floor = state.episode_floor if episode else self.max_cut * base
        if episode and cap <= floor:
            return hold(state, f"{worst} over budget; cut to this window's floor {floor:g}")
        cut = replace(
            state,
            last_cut_at=now,
            pressure_ref=pressure,
            episode_at=state.episode_at if episode else now,
            episode_floor=floor,
            episode_cap=state.episode_cap if episode else cap,
            episode_pressure=state.episode_pressure if episode else pressure,
            episode_load=state.episode_load if episode else known["in_flight"] + known["queued"],
            episode_pace=state.episode_pace if episode else Pace.of(signals),
        )
        if state.judge_at is None:
            cut = replace(cut, judge_at=now, judge_cap=cap, judge_pace=Pace.of(signals))
        reason = f"{worst} at {pressure:.2f}x its budget: x{factor:.2f} of {base:g} in flight"
        # Never raise on a cut: with few requests in flight the product can exceed the cap.
        target = min(cap - 1, max(base * factor, floor))
        return decide(cut, cap, target, reason, min_cap=self.min_cap, max_cap=self.max_cap)

    def _no_cut(
        self, state: SloBandState, known: dict[str, float], worst: str, now: float
    ) -> str | None:
        """Why a pressure over budget must not cut now, or None."""
        if state.futile:
            return f"{worst} over budget, but cutting relieved nothing: back in band first"
        if state.last_cut_at is not None and now - state.last_cut_at < self.cut_dwell_s:
            return f"{worst} over budget; waiting for the last cut to show"
        cap, load = known["cap"], known["in_flight"] + known["queued"]
        if load > self.min_cap and cap < self.max_cap and load < self.max_cut * cap:
            # A cap this controller set already binds nothing: with the load under max_cut of
            # it and no queue, the latency is not the concurrency it admits (long prompts, a
            # slow step), and a cut below the load would only meet the next burst with it.
            return f"{worst} over budget, but the cap {cap:g} binds nothing ({load:g})"
        return None

    def _not_the_load(
        self, state: SloBandState, known: dict[str, float], worst: str, now: float
    ) -> str | None:
        """Why the latency over budget is not the load the cap admits, or None."""
        load = known["in_flight"] + known["queued"]
        if load <= self.min_cap:
            # The window remembers requests that have left: with this few at the gate and
            # inside vLLM, even the lowest cap would admit them all, so a cut relieves nothing
            # now and only starves the next burst.
            return f"{worst} over budget, but {load:g} in flight or queued"
        return self._no_evidence(state, load, worst, now)

    def _no_evidence(self, state: SloBandState, load: float, worst: str, now: float) -> str | None:
        """Why the load gives no evidence that a latency cut would help, or None."""
        # Once a window of cuts began on that evidence, its later cuts need none: the cap they
        # set bounds the load this reads, which could never again pass the calm load (the CPU
        # profile's morning held a cut of 64 for four minutes at 0% of the SLO, the calm load
        # ~107, where limiters cut to 10-20 within a minute).
        cutting = state.episode_pressure is not None
        if (
            worst == "ttft_p95"
            and not cutting
            and not self._grown(load, state.calm_load, state.calm_at, now)
        ):
            # The server kept TTFT in budget at this load minutes ago: the requests have
            # changed (longer prompts), not the concurrency, and a cut would only move their
            # wait to the gate.
            return (
                f"{worst} over budget at a load of {load:g}, not {self.load_growth:g}x and "
                f"{self.min_cap} more than the {state.calm_load:.3g} it served in budget: the "
                "requests, not the concurrency"
            )
        if worst != "preemptions" and not self._grown(
            load, state.futile_load, state.futile_at, now
        ):
            # Cuts at this load were given back lately: they relieved nothing.
            return (
                f"{worst} over budget at a load of {load:g}, where cuts relieved nothing "
                f"lately ({state.futile_load:.3g})"
            )
        return None

    def _below_calm(self, cap: float, state: SloBandState, now: float) -> bool:
        """Whether ``cap`` admits fewer than the calm load remembered (``calm_memory_s``)."""
        calm, at = state.calm_load, state.calm_at
        return calm is not None and at is not None and now - at <= self.calm_memory_s and cap < calm

    def _grown(self, load: float, then: float | None, at: float | None, now: float) -> bool:
        """Whether ``load`` has grown past ``then`` (remembered since ``at``), or none is known."""
        if then is None or at is None or now - at > self.calm_memory_s:
            return True
        return load >= self.load_growth * then and load - then >= self.min_cap

    def _undo_futile(
        self, state: SloBandState, reading: _Reading, now: float, *, turned_away: bool
    ) -> Step[SloBandState] | None:
        """Give back a window of cuts that relieved nothing and turns requests away.

        A settle window after its first cut the latency window holds only requests admitted
        under the cuts. If the pressure has not eased by ``easing`` since, while the gate
        queues or refuses, the latency is not the concurrency the cap admits (long prompts
        at a light load: a 70B cut 1024 -> 4 with 19 in flight kept TTFT at 1.37x): the cap
        goes back to where the window found it, and stays there until the pressure is back in
        its band.

        Unless vLLM took in at least as many requests a second as at the first cut: then the
        cuts cost it no intake, the server is saturated and the gate's refusals are the
        overload's, and the pressure rose with the demand, not despite the cuts. On the CPU
        profile's shifting day the morning's long prompts ramped up while one cut (128 -> 105)
        was judged: TTFT went 1.2x -> 4.6x its budget, the cut was given back, no cut came
        again until evening, and the governor served 4.1-4.6 good requests a second where
        limiters holding ~50 served 6.1-6.9.
        """
        known, signals, pressure, _ = reading
        first, before, then = state.episode_at, state.episode_cap, state.episode_pressure
        if first is None or before is None or then is None or now - first < self.settle_s:
            return None
        relieved = pressure < self.easing * then
        if relieved or not (turned_away or known["queued"] > 0):
            return None
        if _kept_intake(state.episode_pace, Pace.of(signals), self.settle_s):
            return None
        reason = (
            f"{pressure:.2f}x its budget a window after cuts began at {then:.2f}x, with requests "
            f"turned away: the cuts are given back"
        )
        return self._give_back(state, known["cap"], before, reason, now)

    def _give_back(
        self, state: SloBandState, cap: float, before: float, reason: str, now: float
    ) -> Step[SloBandState]:
        """Put the cap back to ``before``, the cap a window of cuts found, as futile.

        The server has shown that cutting at the load of the window's first cut relieves
        nothing: no cut until the pressure is back in its band, and the next latency cut
        needs the load to grow beyond that one.
        """
        undone = replace(
            state,
            futile=True,
            episode_at=None,
            episode_cap=None,
            episode_pressure=None,
            futile_load=state.episode_load,
            futile_at=now,
        )
        return decide(undone, cap, before, reason, min_cap=self.min_cap, max_cap=self.max_cap)

    def _judge_cuts(
        self,
        state: SloBandState,
        known: dict[str, float],
        signals: AdmissionSignals,
        now: float,
    ) -> tuple[SloBandState, Step[SloBandState] | None]:
        """Judge the cuts a window after the first: give them back if they only throttled vLLM.

        Judged once per window of cuts, whatever the pressure says then: a cut that turned
        requests away also lowers the pressure of the ones it let in, so the pressure alone
        cannot tell relief from throttling (:mod:`daemon.policy.admission.pace`).
        """
        first, before, pace = state.judge_at, state.judge_cap, state.judge_pace
        if first is None or now - first < self.settle_s:
            return state, None
        state = replace(state, judge_at=None, judge_cap=None, judge_pace=None)
        now_pace = Pace.of(signals)
        if before is None or pace is None or now_pace is None or not _refusing(signals):
            return state, None
        if not now_pace.throttled_from(pace, self.max_pace_loss):
            return state, None
        reason = (
            f"a window after cuts began vLLM generated {now_pace.tokens_per_s:.0f} tokens/s "
            f"({pace.tokens_per_s:.0f} before) on {now_pace.requests_per_s:.2f} requests/s "
            f"({pace.requests_per_s:.2f}) while the gate turned requests away: the cuts only "
            "throttled it and are given back"
        )
        step = self._give_back(state, known["cap"], before, reason, now)
        return step.state, step


class _Reading(NamedTuple):
    """One tick's signals and the pressure they put on the band."""

    known: dict[str, float]
    signals: AdmissionSignals
    pressure: float
    worst: str


def _kept_intake(then: Pace | None, now: Pace | None, window_s: float) -> bool:
    """Whether vLLM takes in at least as many requests a second now as ``then``.

    Only on :data:`COUNTED_FOR_INTAKE` requests a window or more: on fewer, "as many" is
    noise (RAG prompts on a 70B, ~0.5 a second, 30 a window: one window of cuts was kept by
    chance and the cap stayed at 4-5 for ten minutes, 0.986x -> 0.933x static-default).
    """
    if then is None or now is None:
        return False
    counted = min(then.requests_per_s, now.requests_per_s) * window_s
    return counted >= COUNTED_FOR_INTAKE and now.requests_per_s >= then.requests_per_s


def _refusing(signals: AdmissionSignals) -> bool:
    """Whether the gate turns requests away (its 503s; an optional signal, NaN is none)."""
    return (signals.gate_refusals_per_s or 0.0) > 0
