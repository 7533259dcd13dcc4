"""Shutdown, drain and restart of the simulated engine, in virtual time."""

from __future__ import annotations

import dataclasses

import pytest

from simulator.arrivals import Arrival
from simulator.engine import Engine, Phase
from simulator.profiles import EngineProfile
from simulator.requests import Outcome, RejectReason
from simulator.settings import EngineSettings
from simulator.virtual_time import VirtualRun


def _steady(rate_per_s: int, seconds: int, output_tokens: int = 300) -> list[Arrival]:
    return [Arrival(i / rate_per_s, 500, output_tokens) for i in range(rate_per_s * seconds)]


def test_a_restart_with_a_lower_max_num_seqs_takes_effect_after_the_downtime(
    profile_8b: EngineProfile,
) -> None:
    first = EngineSettings.defaults(profile_8b)
    run = VirtualRun(Engine(profile_8b, first), _steady(20, 120))
    run.run_until(10.0)
    assert run.snapshot().num_running > 8
    restart_at = run.now
    run.restart(dataclasses.replace(first, max_num_seqs=8))
    assert run.engine.phase is Phase.DOWN
    run.run()

    downtime = profile_8b.restart_downtime_s(8, 8192)
    assert downtime < profile_8b.restart_s  # fewer CUDA graphs to capture
    back = restart_at + downtime
    after = [s for s in run.samples if s.t > back + 1]
    assert after
    assert max(s.running for s in after) == 8
    assert all(s.phase == "down" for s in run.samples if restart_at + 1 < s.t < back)
    totals = run.engine.lifetime_totals(run.now)
    assert totals.restarts == 1
    assert totals.downtime_s == pytest.approx(downtime)
    assert run.engine.settings.max_num_seqs == 8
    # shutdown_timeout 0: what was in flight is aborted; what arrived while down is rejected.
    aborted = [r for r in run.finished if r.outcome is Outcome.ABORTED]
    rejected = [r for r in run.finished if r.outcome is Outcome.REJECTED]
    assert aborted
    assert all(r.finished_at == pytest.approx(restart_at) for r in aborted)
    assert all(r.reject_reason is RejectReason.UNAVAILABLE for r in rejected)
    assert len(rejected) == pytest.approx(20 * downtime, abs=2)
    assert len(run.finished) == 20 * 120


def test_a_drain_lets_in_flight_requests_finish_and_rejects_new_ones(
    profile_8b: EngineProfile,
) -> None:
    settings = EngineSettings.defaults(profile_8b, shutdown_timeout=30)
    run = VirtualRun(Engine(profile_8b, settings), _steady(10, 90))
    run.run_until(5.0)
    in_flight = run.snapshot().num_running + run.snapshot().num_waiting
    assert in_flight > 0
    restart_at = run.now
    run.restart()
    assert run.engine.phase is Phase.DRAINING
    run.run_until(6.0)
    assert run.engine.phase is Phase.DRAINING
    run.run()
    outcomes = {o: sum(1 for r in run.finished if r.outcome is o) for o in Outcome}
    assert outcomes[Outcome.ABORTED] == 0
    drain_end = max(r.finished_at for r in run.finished if r.arrived_at < 5.0)
    assert drain_end > 6.0
    rejected = [r for r in run.finished if r.outcome is Outcome.REJECTED]
    back = drain_end + profile_8b.restart_s
    assert min(r.arrived_at for r in rejected) == pytest.approx(5.0, abs=0.1)
    assert max(r.arrived_at for r in rejected) == pytest.approx(back, abs=0.1)
    totals = run.engine.lifetime_totals(run.now)
    assert totals.downtime_s == pytest.approx(back - restart_at)


def test_a_drain_past_its_deadline_aborts_the_rest(profile_8b: EngineProfile) -> None:
    settings = EngineSettings.defaults(profile_8b, shutdown_timeout=1)
    run = VirtualRun(Engine(profile_8b, settings), _steady(10, 10, output_tokens=2000))
    run.run_until(5.0)
    run.engine.shutdown(run.now)
    run.run()
    assert run.engine.phase is Phase.STOPPED
    aborted = [r for r in run.finished if r.outcome is Outcome.ABORTED]
    assert aborted
    assert all(r.finished_at == pytest.approx(6.0, abs=0.05) for r in aborted)
    assert all(r.finished_reason == "abort" for r in aborted)
    late = [r for r in run.finished if r.arrived_at >= 5.0]
    assert late
    assert all(r.outcome is Outcome.REJECTED for r in late)


def test_a_fresh_engine_can_start_loading_like_vllm_serve(profile_70b: EngineProfile) -> None:
    engine = Engine(profile_70b, EngineSettings.defaults(profile_70b), loading=True)
    phases = [engine.phase]
    assert engine.next_transition_at == profile_70b.restart_s
    assert engine.submit(100, 10, 1.0) is None
    engine.advance(profile_70b.restart_s)
    phases.append(engine.phase)
    assert phases == [Phase.DOWN, Phase.SERVING]
    assert engine.submit(100, 10, profile_70b.restart_s) is not None
    totals = engine.lifetime_totals(profile_70b.restart_s)
    assert (totals.restarts, totals.downtime_s) == (0, 0.0)


def test_a_restart_is_refused_unless_the_engine_serves(profile_8b: EngineProfile) -> None:
    engine = Engine(profile_8b, EngineSettings.defaults(profile_8b))
    engine.restart(0.0)
    with pytest.raises(RuntimeError, match="cannot shut down an engine that is down"):
        engine.restart(1.0)


def test_streaming_progress_and_counters_are_readable_between_steps(
    profile_8b: EngineProfile,
) -> None:
    engine = Engine(profile_8b, EngineSettings.defaults(profile_8b))
    request = engine.submit(100, 5, 0.0)
    assert request is not None
    now = 0.0
    seen = []
    while engine.has_work:
        plan = engine.begin_step(now)
        assert plan is not None
        result = engine.end_step()
        now = plan.ends_at
        seen.append(engine.generated_tokens(request))
        assert result.generated_tokens == 1
    assert seen == [1, 2, 3, 4, 5]
    counters = engine.counters
    assert counters is not None
    assert (counters.prompt_tokens, counters.generation_tokens) == (100, 5)
    assert counters.finished == {"stop": 1, "abort": 0}


def test_a_single_request_can_be_aborted_between_steps(profile_8b: EngineProfile) -> None:
    engine = Engine(profile_8b, EngineSettings.defaults(profile_8b, max_num_seqs=1))
    running = engine.submit(100, 50, 0.0)
    queued = engine.submit(100, 50, 0.0)
    assert running is not None
    assert queued is not None
    plan = engine.begin_step(0.0)
    assert plan is not None
    with pytest.raises(RuntimeError, match="abort after end_step"):
        engine.abort(running, 0.0)
    engine.end_step()
    engine.abort(queued, plan.ends_at)
    engine.abort(running, plan.ends_at)
    engine.abort(running, plan.ends_at)  # a second abort of an ended request is a no-op
    records = engine.take_finished()
    assert [(r.request_id, r.finished_reason) for r in records] == [
        ("cmpl-1", "abort"),
        ("cmpl-0", "abort"),
    ]
    assert records[1].output_tokens == 1
    scheduler = engine.scheduler
    assert scheduler is not None
    assert scheduler.kv.used == 0
    assert not engine.has_work
