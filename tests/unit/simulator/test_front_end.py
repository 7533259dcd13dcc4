"""The front end: a request's way to the scheduler, a FIFO server with a delay behind it."""

from __future__ import annotations

import pytest

from simulator.arrivals import Arrival
from simulator.engine import Engine, Phase
from simulator.front_end import FrontEnd
from simulator.profiles import EngineProfile
from simulator.requests import Outcome, Request
from simulator.settings import EngineSettings
from simulator.virtual_time import VirtualRun


def _request(name: str, at: float) -> Request:
    return Request(name, at, 16, 4)


def test_requests_queue_for_the_serial_part_and_then_wait_the_latency() -> None:
    way = FrontEnd(service_s=0.002, latency_s=0.010)
    ready = [way.enter(_request(str(i), 0.0), 0.0) for i in range(3)]
    assert ready == pytest.approx([0.012, 0.014, 0.016])
    # One arriving after the queue has emptied waits only its own service.
    assert way.enter(_request("late", 1.0), 1.0) == pytest.approx(1.012)
    assert [r.request_id for _, r in way.due(0.014)] == ["0", "1"]
    assert way.next_ready_at == pytest.approx(0.016)
    assert way.pending == 2


def test_the_gpu_profiles_have_no_front_end(profile_8b: EngineProfile) -> None:
    engine = Engine(profile_8b, EngineSettings.defaults(profile_8b))
    assert engine.submit(16, 4, 0.0) is not None
    assert engine.has_work  # straight into the scheduler, as before the front end existed


def _with_front_end(profile: EngineProfile, service_us: float, latency_us: float) -> Engine:
    fitted = profile.model_copy(
        update={"frontend_us_per_request": service_us, "frontend_latency_us": latency_us}
    )
    return Engine(fitted, EngineSettings.defaults(fitted))


def test_a_lone_requests_ttft_is_its_way_in_plus_one_step(profile_8b: EngineProfile) -> None:
    run = VirtualRun(_with_front_end(profile_8b, 1000, 9000), [Arrival(0.5, 100, 3)])
    run.run()
    (record,) = run.finished
    step = profile_8b.step_time_s(100, 0, 0)
    assert record.ttft_s == pytest.approx(0.010 + step)
    assert record.arrived_at == 0.5
    assert record.queue_time_s == pytest.approx(0.010)


def test_a_burst_reaches_the_scheduler_one_service_time_apart(profile_8b: EngineProfile) -> None:
    run = VirtualRun(_with_front_end(profile_8b, 5000, 0), [Arrival(0.0, 16, 2)] * 10)
    run.run()
    scheduled = sorted(r.queue_time_s or 0.0 for r in run.finished)
    # The first is in after 5 ms, the last after 50 ms: the front end, not the engine, paces it.
    assert scheduled[0] == pytest.approx(0.005)
    assert scheduled[-1] >= 0.050
    assert all(r.outcome is Outcome.COMPLETED for r in run.finished)


def test_requests_on_the_way_are_aborted_by_a_shutdown(profile_8b: EngineProfile) -> None:
    engine = _with_front_end(profile_8b, 0, 50_000)
    request = engine.submit(16, 4, 0.0)
    assert request is not None
    assert engine.has_requests
    assert not engine.has_work
    assert engine.next_transition_at == pytest.approx(0.05)
    engine.shutdown(0.01)
    assert engine.phase is Phase.STOPPED
    (record,) = engine.take_finished()
    assert record.outcome is Outcome.ABORTED
    assert not engine.has_requests


def test_a_client_that_leaves_on_the_way_aborts_its_request(profile_8b: EngineProfile) -> None:
    engine = _with_front_end(profile_8b, 0, 50_000)
    request = engine.submit(16, 4, 0.0)
    assert request is not None
    engine.abort(request, 0.02)
    (record,) = engine.take_finished()
    assert record.outcome is Outcome.ABORTED
    assert engine.next_transition_at is None
