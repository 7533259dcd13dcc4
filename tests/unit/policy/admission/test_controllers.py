"""The admission controllers: worked examples per controller, then properties of all of them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.policy.admission.aimd import Aimd
from daemon.policy.admission.controllers import CONTROLLERS, build_controller
from daemon.policy.admission.gradient2 import Gradient2
from daemon.policy.admission.signals import SIGNAL_NAMES, AdmissionSignals, clamp
from daemon.policy.admission.slo_band import SloBand, SloBandState
from daemon.policy.admission.vegas import Vegas

# A healthy vLLM with its gate: the cap binds (as many in flight as allowed), nothing breaks.
CALM = AdmissionSignals(
    cap=100,
    in_flight=100,
    queued=0,
    latency_s=0.2,
    ttft_p95_s=0.3,
    tpot_p95_s=0.03,
    preemptions_per_s=0.0,
    vllm_errors_per_s=0.0,
    gate_refusals_per_s=0.0,
)


def at(**changes: float | None) -> AdmissionSignals:
    return replace(CALM, **changes)


# -- AIMD -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("signals", "cap"),
    [
        (at(preemptions_per_s=1.0), 90),  # a drop: x0.9
        (at(vllm_errors_per_s=0.2), 90),
        (at(latency_s=2.5), 90),  # over the timeout (the TTFT SLO) counts as a drop
        (at(cap=5, in_flight=5, preemptions_per_s=1.0), 4),  # at least one less
        (at(), 101),  # in use, no drop: +1
        (at(in_flight=60), 101),  # half in use is in use
        (at(in_flight=40), None),  # app-limited: hold
        (at(cap=256, in_flight=256), None),  # at max-num-seqs already
        (at(cap=300, in_flight=300), 256),  # above the bound (set by hand): back into it
        (at(cap=2, in_flight=2, preemptions_per_s=1.0), None),  # at the floor
    ],
)
def test_aimd(signals: AdmissionSignals, cap: int | None) -> None:
    aimd = Aimd(min_cap=2, max_cap=256)
    assert aimd.step(aimd.initial_state(), signals, 0.0).cap == cap


# -- Gradient2 --------------------------------------------------------------------------


def test_gradient2_grows_slowly_while_latency_stays_at_its_baseline() -> None:
    gradient = Gradient2(min_cap=4, max_cap=256)
    state = gradient.initial_state()
    caps = []
    signals = at()
    for tick in range(3):
        state, cap, _ = gradient.step(state, signals, float(tick))
        caps.append(cap)
        signals = replace(signals, cap=cap or signals.cap, in_flight=cap or signals.cap)
    # +queue_size (4) smoothed by 0.2: +0.8 per window, the gate's cap rounded down.
    assert caps == [None, 101, 102]
    assert state.estimate == pytest.approx(102.4)


def test_gradient2_shrinks_by_the_latency_gradient_at_most_by_half() -> None:
    gradient = Gradient2(min_cap=4, max_cap=256, warmup=1)
    state, _, _ = gradient.step(gradient.initial_state(), at(), 0.0)  # baseline 0.2 s, 100.8
    # Twice the baseline (which barely moves): gradient ~0.5 -> 54.6, smoothed: 80.6 + 10.9.
    after = gradient.step(state, at(latency_s=0.4), 1.0)
    assert after.cap == 91
    # Ten times the baseline is an outlier as far as one window goes: still x0.5 at most.
    assert gradient.step(state, at(latency_s=2.0), 1.0).cap == 91


def test_gradient2_holds_when_app_limited_but_learns_the_baseline() -> None:
    gradient = Gradient2(min_cap=4, max_cap=256)
    state, cap, reason = gradient.step(gradient.initial_state(), at(in_flight=20), 0.0)
    assert cap is None
    assert "app-limited" in reason
    assert state.long_latency_s == pytest.approx(0.2)


# -- Vegas ------------------------------------------------------------------------------


def _vegas_after_learning() -> tuple[Vegas, Any]:
    vegas = Vegas(min_cap=4, max_cap=256)
    state, cap, reason = vegas.step(vegas.initial_state(), at(latency_s=1.0), 0.0)
    assert cap is None
    assert "no-load" in reason
    return vegas, state


@pytest.mark.parametrize(
    ("signals", "cap"),
    [
        (at(latency_s=1.0), 112),  # no queue (<= log10 100 = 2): +6 * 2
        (at(latency_s=1.05), 102),  # queue ceil(100 * 0.048) = 5 < alpha 6: +2
        (at(latency_s=1.1), None),  # queue 10, between alpha 6 and beta 12: hold
        (at(latency_s=1.2), 98),  # queue 17 > beta 12: -2
        (at(latency_s=1.0, preemptions_per_s=0.5), 98),  # a drop: -2
        (at(latency_s=1.0, in_flight=30), None),  # app-limited
    ],
)
def test_vegas(signals: AdmissionSignals, cap: int | None) -> None:
    vegas, state = _vegas_after_learning()
    assert vegas.step(state, signals, 1.0).cap == cap


def test_vegas_probes_its_no_load_latency_again_after_a_while() -> None:
    vegas = Vegas(min_cap=1, max_cap=256, probe_multiplier=1)
    state = vegas.step(vegas.initial_state(), at(cap=2, in_flight=2, latency_s=1.0), 0.0).state
    # 0.75 * 1 * 2 windows: the second window probes, whatever the latency.
    probed = vegas.step(state, at(cap=2, in_flight=2, latency_s=3.0), 1.0)
    assert probed.cap is None
    assert probed.state.no_load_s == 3.0


# -- SLO band ---------------------------------------------------------------------------

BAND = SloBand(min_cap=4, max_cap=256)


@pytest.mark.parametrize(
    ("signals", "cap", "why"),
    [
        # TTFT p95 at 2x its 1 s budget: halve what is in flight (not the cap).
        (at(cap=256, in_flight=100, ttft_p95_s=2.0), 50, "ttft_p95"),
        (at(cap=256, in_flight=80, ttft_p95_s=1.25), 64, "ttft_p95"),  # x0.8
        (at(cap=256, in_flight=100, ttft_p95_s=1.05), 90, "ttft_p95"),  # never gentler than x0.9
        (at(cap=256, in_flight=100, tpot_p95_s=0.16), 50, "tpot_p95"),
        (at(cap=256, in_flight=100, preemptions_per_s=3.0), 50, "preemptions"),
        (at(cap=40, in_flight=200, ttft_p95_s=2.0), 20, "ttft_p95"),  # in flight above the cap
        (at(cap=6, in_flight=6, ttft_p95_s=4.0), 4, "ttft_p95"),  # floor
        (at(cap=50, in_flight=50, queued=3), 53, "3 queued"),  # room: grow by the queue
        (at(cap=40, in_flight=40, queued=100), 44, "100 queued"),  # by 10% of the cap at most
        (at(cap=250, in_flight=250, queued=100), 256, "queued"),  # never above max-num-seqs
        (at(cap=50, in_flight=30, gate_refusals_per_s=0.5), 51, "0 queued"),  # refusals: demand
        (at(cap=50, in_flight=30), None, "no demand"),
        (at(cap=50, in_flight=50, queued=10, ttft_p95_s=0.8), None, "inside the band"),
        # Over budget with no more at the gate and inside vLLM than the lowest cap admits: the
        # window remembers a burst that has left, and a cut would only starve the next one.
        (at(cap=256, in_flight=3, queued=1, ttft_p95_s=3.0), None, "4 in flight or queued"),
        (at(cap=8, in_flight=0, ttft_p95_s=3.0), None, "0 in flight or queued"),
        # A cap it set that binds nothing (7 of 40, no queue): the latency is not the load.
        (at(cap=40, in_flight=7, ttft_p95_s=1.6), None, "the cap 40 binds nothing (7)"),
        (at(cap=40, in_flight=15, queued=6, ttft_p95_s=1.6), 9, "ttft_p95"),  # 21 of 40: cut
    ],
)
def test_slo_band(signals: AdmissionSignals, cap: int | None, why: str) -> None:
    step = BAND.step(BAND.initial_state(), signals, 100.0)
    assert step.cap == cap
    assert why in step.reason


def test_slo_band_waits_for_a_cut_to_show_and_cuts_again_only_if_it_does_not_ease() -> None:
    breach = at(cap=256, in_flight=100, ttft_p95_s=1.6)
    state, cap, _ = BAND.step(BAND.initial_state(), breach, 0.0)
    assert cap == 62  # x(1/1.6) of 100
    breach = at(cap=62, in_flight=62, ttft_p95_s=1.6)
    assert BAND.step(state, breach, 4.0).cap is None  # within cut_dwell_s
    eased = BAND.step(state, replace(breach, ttft_p95_s=1.2), 6.0)
    assert eased.cap is None
    assert "easing" in eased.reason
    assert eased.state.pressure_ref == pytest.approx(1.2)
    stuck = BAND.step(eased.state, replace(breach, ttft_p95_s=1.15), 7.0)
    assert stuck.cap == 53  # 1.15 is not 10% better than 1.2: x(1/1.15) of 62
    assert stuck.state.last_cut_at == 7.0


def test_slo_band_cuts_at_most_by_half_per_window_while_the_window_lags() -> None:
    # The latency window still shows requests admitted before the cut: the pressure stays at
    # 2x, yet within one settle window the cap goes no lower than half of the first in-flight.
    band = SloBand(min_cap=4, max_cap=1024)
    breach = at(cap=1024, in_flight=360, ttft_p95_s=2.0)
    state, cap, _ = band.step(band.initial_state(), breach, 0.0)
    assert cap == 180
    floor = band.step(state, replace(breach, cap=180, in_flight=180), 10.0)
    assert floor.cap is None
    assert "floor 180" in floor.reason
    # A new window: the pressure still says so, another halving of what is in flight.
    again = band.step(state, replace(breach, cap=180, in_flight=180), 61.0)
    assert again.cap == 90
    assert again.state.episode_at == 61.0


def test_slo_band_floor_holds_between_a_gentle_first_cut_and_a_deeper_second() -> None:
    band = SloBand(min_cap=4, max_cap=1024)
    state, cap, _ = band.step(band.initial_state(), at(cap=1024, in_flight=300, ttft_p95_s=1.1), 0)
    assert cap == 270  # x0.9
    rising = at(cap=270, in_flight=270, ttft_p95_s=3.0)
    state, cap, _ = band.step(state, rising, 6.0)
    assert cap == 150  # x0.5 of 270 = 135, but not below half of the 300 in flight at first
    assert band.step(state, replace(rising, cap=150, in_flight=150), 12.0).cap is None


def test_slo_band_grows_one_step_per_dwell_and_not_within_a_window_of_a_cut() -> None:
    grow = at(cap=50, in_flight=50, queued=5)
    after_cut = SloBandState(last_cut_at=10.0, pressure_ref=2.0)
    assert BAND.step(after_cut, grow, 11.0).cap is None
    settling = BAND.step(after_cut, grow, 69.0)
    assert settling.cap is None
    assert "settling" in settling.reason
    state, cap, _ = BAND.step(after_cut, grow, 70.0)
    assert cap == 55
    assert BAND.step(state, replace(grow, cap=55, in_flight=55), 74.0).cap is None
    assert BAND.step(state, replace(grow, cap=55, in_flight=55), 75.0).cap == 60
    # Time 0 is a time like any other.
    at_zero = BAND.step(BAND.initial_state(), grow, 0.0).state
    assert BAND.step(at_zero, grow, 1.0).cap is None


# -- every controller -------------------------------------------------------------------


def test_each_controller_says_the_window_its_signals_are_read_over() -> None:
    # slo-band's pacing waits out one window after a cut: its window is its settle_s.
    assert build_controller("slo-band", min_cap=1, max_cap=8).window_s == 60.0
    assert build_controller("slo-band", min_cap=1, max_cap=8, settle_s=30).window_s == 30.0
    for kind in ("gradient2", "aimd", "vegas"):  # as measured in the simulator's baselines
        assert build_controller(kind, min_cap=1, max_cap=8).window_s == 60.0
        assert build_controller(kind, min_cap=1, max_cap=8, window_s=15).window_s == 15.0
    for kind, name in [("slo-band", "settle_s"), ("aimd", "window_s")]:
        for nonsense in (0.0, -1.0, float("nan")):
            with pytest.raises(ValueError, match="signal window must be a positive"):
                build_controller(kind, min_cap=1, max_cap=8, **{name: nonsense})


def test_the_registry_builds_each_kind_and_refuses_nonsense() -> None:
    assert set(CONTROLLERS) == {"slo-band", "gradient2", "aimd", "vegas"}
    assert build_controller("aimd", min_cap=1, max_cap=8, backoff_ratio=0.5).max_cap == 8
    with pytest.raises(ValueError, match="unknown admission controller"):
        build_controller("pid", min_cap=1, max_cap=8)
    with pytest.raises(ValueError, match="aimd"):
        build_controller("aimd", min_cap=1, max_cap=8, smoothing=0.2)
    with pytest.raises(ValueError, match="min_cap <= max_cap"):
        build_controller("vegas", min_cap=9, max_cap=8)
    with pytest.raises(ValueError, match="min_cap"):
        build_controller("gradient2", min_cap=0, max_cap=8)
    for loss in (0.0, 1.0):
        with pytest.raises(ValueError, match="max_pace_loss"):
            build_controller("slo-band", min_cap=1, max_cap=8, max_pace_loss=loss)


def test_clamp_rounds_down_into_the_bounds() -> None:
    assert [clamp(v, 2, 10) for v in (0.0, 2.9, 9.99, 11.0, float("inf"))] == [2, 2, 9, 10, 10]
    assert clamp(float("nan"), 2, 10) == 2


_values = {
    "cap": st.integers(0, 2000).map(float),
    "in_flight": st.integers(0, 2000).map(float),
    "queued": st.integers(0, 5000).map(float),
    "latency_s": st.floats(0.0, 60.0),
    "ttft_p95_s": st.floats(0.0, 60.0),
    "tpot_p95_s": st.floats(0.0, 2.0),
    "preemptions_per_s": st.floats(0.0, 100.0),
    "vllm_errors_per_s": st.floats(0.0, 100.0),
    "gate_refusals_per_s": st.floats(0.0, 100.0),
}
_signals = st.builds(
    AdmissionSignals,
    **{name: st.one_of(st.none(), strategy) for name, strategy in _values.items()},
)
_bounds = st.integers(1, 64).flatmap(lambda low: st.tuples(st.just(low), st.integers(low, 1024)))


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(sorted(CONTROLLERS)),
    bounds=_bounds,
    ticks=st.lists(st.tuples(st.floats(0.0, 30.0), _signals), min_size=1, max_size=40),
)
def test_caps_stay_in_bounds_and_stale_signals_change_nothing(
    kind: str, bounds: tuple[int, int], ticks: list[tuple[float, AdmissionSignals]]
) -> None:
    controller = build_controller(kind, min_cap=bounds[0], max_cap=bounds[1])
    assert set(controller.needs) <= set(SIGNAL_NAMES)
    state = controller.initial_state()
    now = 0.0
    for gap, signals in ticks:
        now += gap
        step = controller.step(state, signals, now)
        if signals.missing(controller.needs):
            assert step.cap is None
            assert step.state == state
        if step.cap is not None:
            assert bounds[0] <= step.cap <= bounds[1]
            assert step.cap != signals.cap, "a change must change something"
        state = step.state


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(sorted(CONTROLLERS)),
    signals=_signals.filter(lambda s: s.cap is not None and s.cap >= 1),
)
def test_without_any_signal_but_the_cap_every_controller_holds(
    kind: str, signals: AdmissionSignals
) -> None:
    controller = build_controller(kind, min_cap=1, max_cap=512)
    blind = AdmissionSignals(cap=signals.cap)
    step = controller.step(controller.initial_state(), blind, 0.0)
    assert step.cap is None
    assert step.reason.startswith("hold: no fresh")


def test_slo_band_gives_back_a_window_of_cuts_that_relieved_nothing() -> None:
    # Long prompts at a light load: TTFT over budget with 19 in flight at the wide-open gate.
    band = SloBand(min_cap=4, max_cap=1024)
    hot = at(cap=1024, in_flight=19, ttft_p95_s=1.34)
    state, cap, _ = band.step(band.initial_state(), hot, 0.0)
    assert cap == 14  # x0.75 of 19
    # A window later the pressure has not eased and the gate queues: the cuts are given back.
    stuck = replace(hot, cap=14, in_flight=14, queued=12, ttft_p95_s=1.37)
    undone = band.step(state, stuck, 61.0)
    assert undone.cap == 1024
    assert "given back" in undone.reason
    # Cutting at 19 relieved nothing: the next latency cut needs the load to grow beyond it.
    assert undone.state.futile_load == 19
    # Still over budget: no cut until the pressure is back in its band; then cuts again.
    held = band.step(undone.state, replace(hot, ttft_p95_s=1.4), 70.0)
    assert held.cap is None
    assert "relieved nothing" in held.reason
    calm = band.step(undone.state, replace(hot, ttft_p95_s=0.8), 80.0)
    assert band.step(calm.state, replace(hot, in_flight=24), 90.0).cap == 17  # x0.746 of 24


def test_slo_band_keeps_cuts_that_cost_vllm_no_intake_while_the_demand_ramps_up() -> None:
    # The CPU profile's morning: long prompts ramp up on a saturated server; one cut 128 -> 105
    # (TTFT 1.22x its budget), and a window later TTFT is 4.6x while the gate refuses more.
    band = SloBand(min_cap=4, max_cap=128, ttft_target_s=1.5, ttft_slo_s=2.0)
    ramp = at(
        cap=128,
        in_flight=128,
        queued=14,
        ttft_p95_s=1.83,
        gen_tokens_per_s=300.0,
        gate_admitted_per_s=5.8,
        gate_refusals_per_s=1.7,
    )
    state, cap, _ = band.step(band.initial_state(), ramp, 0.0)
    assert cap == 104  # x0.82 of 128
    later = replace(
        ramp, cap=105, in_flight=105, queued=11, ttft_p95_s=9.2, gate_refusals_per_s=3.9
    )
    # vLLM took in as many requests as before: the cut cost it nothing, the demand grew.
    for intake in (5.8, 6.1):
        kept = band.step(state, replace(later, gate_admitted_per_s=intake), 61.0)
        assert kept.cap != 128, kept.reason
        assert not kept.state.futile
    # Fewer let in and no relief: futile, as on a server the cut only throttled.
    undone = band.step(state, replace(later, gate_admitted_per_s=5.5), 61.0)
    assert undone.cap == 128
    assert "given back" in undone.reason
    # At half a request a second a window counts 30: "as many" is noise, and futile it is.
    slow = replace(ramp, gate_admitted_per_s=0.5, gate_refusals_per_s=0.1)
    slow_state = band.step(band.initial_state(), slow, 0.0).state
    noisy = replace(later, gate_admitted_per_s=0.55, gate_refusals_per_s=0.2)
    assert band.step(slow_state, noisy, 61.0).cap == 128


def test_slo_band_cuts_a_window_on_after_the_evidence_that_began_it() -> None:
    # The night served 107 in flight in budget; the morning's 142 (a quarter more) began cuts.
    band = SloBand(min_cap=4, max_cap=128, ttft_target_s=1.5, ttft_slo_s=2.0)
    night = SloBandState(calm_load=107.0, calm_at=0.0)
    morning = at(cap=128, in_flight=128, queued=14, ttft_p95_s=1.83)
    first = band.step(night, morning, 10.0)
    assert first.cap == 104
    # Six seconds on, still over budget and not easing: 104 in flight and 20 queued are not a
    # quarter above 107, but the cap bounds what is seen; the window's evidence stands.
    again = band.step(
        first.state, replace(morning, cap=104, in_flight=104, queued=20, ttft_p95_s=2.4), 16.0
    )
    assert again.cap is not None, again.reason
    assert again.cap < 104
    # Without a window of cuts begun, the same reading is the requests, not the concurrency.
    fresh = band.step(
        night, replace(morning, cap=104, in_flight=104, queued=20, ttft_p95_s=2.4), 16.0
    )
    assert fresh.cap is None or fresh.cap >= 104
    assert "the requests, not the concurrency" in fresh.reason


def test_slo_band_cuts_on_ttft_only_with_evidence_that_the_load_grew() -> None:
    band = SloBand(min_cap=4, max_cap=1024)
    # A night of chat served in budget at 30 in flight, then long code prompts at 19.
    night = band.step(band.initial_state(), at(cap=1024, in_flight=30, ttft_p95_s=0.5), 0.0)
    assert night.state.calm_load == 30
    code = at(cap=1024, in_flight=19, ttft_p95_s=1.34)
    held = band.step(night.state, code, 30.0)
    assert held.cap is None
    assert "the requests, not the concurrency" in held.reason
    # 37 is not yet a quarter more than 30; 38 is: a burst is cut as before.
    assert band.step(night.state, replace(code, in_flight=37), 30.0).cap is None
    assert band.step(night.state, replace(code, in_flight=38), 30.0).cap == 28
    # TPOT and preemptions need no such evidence: a smaller batch shortens each decode step
    # and frees KV at any load.
    assert band.step(night.state, replace(code, ttft_p95_s=0.5, tpot_p95_s=0.16), 30.0).cap == 9
    assert band.step(night.state, replace(code, preemptions_per_s=1.5), 30.0).cap == 9
    # But TPOT cuts that were given back at this load lately need the load to grow too.
    futile = replace(night.state, futile_load=19.0, futile_at=20.0)
    tpot = band.step(futile, replace(code, ttft_p95_s=0.5, tpot_p95_s=0.16), 30.0)
    assert tpot.cap is None
    assert "relieved nothing lately" in tpot.reason
    # A calm load older than calm_memory_s is no evidence: the cut comes as without one.
    assert band.step(night.state, code, 601.0).cap == 14


def test_slo_band_grows_inside_its_band_while_the_gate_turns_requests_away() -> None:
    # Cut to 4 long ago; the pressure sits inside the band (0.6-1), the gate refuses requests.
    # The server kept its latency in budget at 30 in flight with nobody waiting at the gate.
    calm = SloBandState(calm_load=30.0, calm_at=90.0)
    refusing = at(cap=4, in_flight=4, queued=3, ttft_p95_s=0.9, gate_refusals_per_s=0.2)
    grown = BAND.step(calm, refusing, 100.0)
    assert grown.cap == 5
    assert "refusing below the calm load" in grown.reason
    # Without refusals, a queue inside the band is held (the hysteresis) ...
    held = BAND.step(calm, replace(refusing, gate_refusals_per_s=0.0), 100.0)
    assert held.cap is None
    assert "inside the band" in held.reason
    # ... and so is a cap above the calm load: a burst's cut, let back in, is cut again.
    above = replace(refusing, cap=40, in_flight=40)
    assert BAND.step(calm, above, 100.0).cap is None
    assert BAND.step(BAND.initial_state(), refusing, 100.0).cap is None  # no calm load known
    assert BAND.step(calm, refusing, 691.0).cap is None  # one older than calm_memory_s
    # Within a window of a cut the latency still shows the old cap: no raise yet.
    after_cut = replace(calm, last_cut_at=90.0, pressure_ref=1.5)
    assert BAND.step(after_cut, refusing, 100.0).cap is None


def test_slo_band_keeps_cuts_that_eased_the_pressure_or_turned_nobody_away() -> None:
    band = SloBand(min_cap=4, max_cap=1024)
    hot = at(cap=1024, in_flight=19, ttft_p95_s=1.34)
    state = band.step(band.initial_state(), hot, 0.0).state
    eased = band.step(state, replace(hot, cap=14, in_flight=14, queued=12, ttft_p95_s=1.1), 61.0)
    assert eased.cap is None
    assert "easing" in eased.reason
    nobody_waits = band.step(state, replace(hot, cap=14, in_flight=14, ttft_p95_s=1.37), 61.0)
    assert nobody_waits.cap == 10  # a new window: x0.73 of 14


def test_slo_band_grows_when_the_latency_is_the_requests_and_the_gate_turns_them_away() -> None:
    # Long prompts: TTFT over budget at 19 in flight, where 30 were served in budget lately,
    # so the cap is not what keeps the latency; at 19 it binds and the gate refuses requests.
    band = SloBand(min_cap=4, max_cap=1024)
    calm = SloBandState(calm_load=30.0, calm_at=90.0)
    binding = at(cap=19, in_flight=19, queued=2, ttft_p95_s=1.34, gate_refusals_per_s=0.3)
    grown = band.step(calm, binding, 100.0)
    assert grown.cap == 20  # by the queue, at most 10% of the cap, as below the band
    # The decision record says why it grew over budget, not "pressure below the band".
    assert "the requests, not the concurrency; the gate turns requests away" in grown.reason
    assert "< 0.6" not in grown.reason
    # Without refusals the same reading is held: nobody is turned away.
    held = band.step(calm, replace(binding, gate_refusals_per_s=0.0), 100.0)
    assert held.cap is None
    assert "the requests, not the concurrency" in held.reason
    # Nor while the cap binds nothing (refusals of a window ago): nobody waits now.
    assert band.step(calm, replace(binding, in_flight=15, queued=0), 100.0).cap is None
    # At the floor's load too: four in flight at a cap of four, requests refused.
    floor = at(cap=4, in_flight=4, ttft_p95_s=3.0, gate_refusals_per_s=0.8)
    assert band.step(band.initial_state(), floor, 100.0).cap == 5
    # Within a window of a cut, the latency still shows the old cap: no raise yet.
    after_cut = replace(calm, last_cut_at=90.0)
    assert band.step(after_cut, binding, 100.0).cap is None


def test_slo_band_gives_back_cuts_that_only_made_vllm_do_less_work() -> None:
    # Clumps of chat on a large server: a clump puts TTFT over budget at 13 in flight.
    band = SloBand(min_cap=4, max_cap=1024)
    clump = at(
        cap=1024, in_flight=13, ttft_p95_s=2.3, gen_tokens_per_s=400.0, gate_admitted_per_s=3.5
    )
    state, cap, _ = band.step(band.initial_state(), clump, 0.0)
    assert cap == 6  # x0.5 of 13, the deepest cut of a window: 6.5 rounds down
    # A window later vLLM generates a quarter less on a third fewer requests, and the gate
    # turns requests away: the cut throttled a server with room to spare. Given back, even
    # though the requests let in are now far inside the budget, and no cut until back in band.
    later = at(
        cap=6,
        in_flight=6,
        ttft_p95_s=0.6,
        gen_tokens_per_s=300.0,
        gate_admitted_per_s=2.4,
        gate_refusals_per_s=1.1,
    )
    undone = band.step(state, later, 61.0)
    assert undone.cap == 1024
    assert "only throttled it" in undone.reason
    assert undone.state.futile_load == 13
    # The mix changed, not the pace: fewer tokens on as many requests (short answers now), or
    # as many tokens on fewer requests; or within max_pace_loss; or nobody turned away.
    for kept_reading in (
        replace(later, gate_admitted_per_s=3.4),
        replace(later, gen_tokens_per_s=420.0),
        replace(later, gen_tokens_per_s=330.0),
        replace(later, gate_refusals_per_s=0.0),
        replace(later, gate_admitted_per_s=None),
    ):
        kept = band.step(state, kept_reading, 61.0)
        assert kept.cap != 1024
        # Judged once: the next tick does not judge the same cuts again.
        assert kept.state.judge_at is None
        assert band.step(kept.state, later, 70.0).cap != 1024


def test_slo_band_keeps_the_slo_as_budget_while_nobody_queues_at_the_gate() -> None:
    # admission-cap's budgets: 1.5 s inside vLLM when a request may have waited at the gate,
    # the 2 s SLO itself when none did. A TTFT p95 of 1.8 s with nobody queued meets the SLO,
    # whether or not the gate refused requests in the window: those never reached vLLM.
    band = SloBand(min_cap=4, max_cap=1024, ttft_target_s=1.5, ttft_slo_s=2.0)
    refusing = at(cap=12, in_flight=12, ttft_p95_s=1.8, gate_refusals_per_s=0.8)
    held = band.step(band.initial_state(), refusing, 100.0)
    assert held.cap is None
    assert "inside the band" in held.reason
    # With requests queued at the gate now, the ones it admits have spent part of the SLO.
    queueing = band.step(band.initial_state(), replace(refusing, queued=5), 100.0)
    assert queueing.cap is not None
    assert queueing.cap < 12
