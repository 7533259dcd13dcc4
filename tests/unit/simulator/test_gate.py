"""The admission gate: the pure cap-and-queue model, then the gate in front of the engine."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.arrivals import Arrival
from simulator.engine import Engine
from simulator.gate import Gate, waited_record
from simulator.profiles import EngineProfile
from simulator.report import build_report
from simulator.requests import Outcome, RejectReason
from simulator.settings import EngineSettings
from simulator.virtual_time import VirtualRun

# -- the pure model ---------------------------------------------------------------------


def test_requests_go_in_up_to_the_cap_then_wait_in_arrival_order() -> None:
    gate: Gate[str] = Gate(cap=2, queue_timeout_s=10.0)
    assert [gate.arrive(name, 0.0) for name in "abcd"] == [True, True, False, False]
    assert (gate.in_flight, gate.queued) == (2, 2)
    gate.release()
    assert [w.item for w in gate.admit(1.0)] == ["c"]
    # A newcomer never overtakes a request that waits, even with a slot free.
    gate.release()
    assert gate.arrive("e", 2.0) is False
    assert [w.item for w in gate.admit(2.0)] == ["d"]
    assert gate.admitted == 4


def test_a_request_that_waits_past_the_timeout_is_refused_and_never_goes_in() -> None:
    gate: Gate[str] = Gate(cap=1, queue_timeout_s=1.5)
    gate.arrive("inside", 0.0)
    gate.arrive("early", 0.2)
    gate.arrive("late", 1.0)
    assert gate.expire(1.6) == []  # "early" waited 1.4 s
    [expired] = gate.expire(1.7)
    assert (expired.item, expired.arrived_at, expired.deadline) == ("early", 0.2, 1.7)
    assert gate.next_deadline == 2.5
    gate.release()
    assert [w.item for w in gate.admit(2.0)] == ["late"]
    assert gate.timed_out == 1
    assert gate.next_deadline == math.inf


def test_the_cap_changes_live_a_raise_admits_at_once_a_cut_evicts_nobody() -> None:
    gate: Gate[int] = Gate(cap=2, queue_timeout_s=60.0)
    for number in range(6):
        gate.arrive(number, 0.0)
    gate.set_cap(5)
    assert [w.item for w in gate.admit(1.0)] == [2, 3, 4]
    gate.set_cap(1)
    assert gate.in_flight == 5  # nothing inside is touched
    for _ in range(4):
        gate.release()
        assert gate.admit(2.0) == []  # still at or above the new cap
    gate.release()
    assert [w.item for w in gate.admit(3.0)] == [5]


def test_nonsense_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Gate(cap=0, queue_timeout_s=1.0)
    with pytest.raises(ValueError, match="positive"):
        Gate(cap=1, queue_timeout_s=0.0)
    gate: Gate[str] = Gate(cap=1, queue_timeout_s=1.0)
    with pytest.raises(ValueError, match="at least 1"):
        gate.set_cap(0)
    with pytest.raises(RuntimeError, match="release"):
        gate.release()
    gate.arrive("a", 0.0)
    gate.arrive("b", 5.0)
    with pytest.raises(RuntimeError, match="back in time"):
        gate.arrive("c", 4.0)
    gate.release()
    with pytest.raises(RuntimeError, match="expire"):
        gate.admit(6.0)  # "b" is past its deadline: expire() first


_operations = st.lists(
    st.one_of(
        st.tuples(st.just("arrive"), st.floats(0.0, 2.0)),
        st.tuples(st.just("release"), st.floats(0.0, 2.0)),
        st.tuples(st.just("cap"), st.integers(1, 6)),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(cap=st.integers(1, 6), timeout=st.floats(0.1, 5.0), operations=_operations)
def test_every_request_ends_once_in_order_never_past_its_deadline(
    cap: int, timeout: float, operations: list[tuple[str, float]]
) -> None:
    gate: Gate[int] = Gate(cap, timeout)
    now = 0.0
    arrived = 0
    inside: list[int] = []  # in the order they went in
    expired: list[int] = []

    def settle() -> None:
        expired.extend(w.item for w in gate.expire(now))
        admitted = gate.admit(now)
        for waiting in admitted:
            assert now - waiting.arrived_at < timeout
            inside.append(waiting.item)
        if admitted:
            assert gate.in_flight <= gate.cap

    for kind, value in operations:
        if kind == "arrive":
            now += value
            settle()
            if gate.arrive(arrived, now):
                inside.append(arrived)
                assert gate.in_flight <= gate.cap
            arrived += 1
        elif kind == "release" and gate.in_flight:
            now += value
            gate.release()
            settle()
        elif kind == "cap":
            gate.set_cap(int(value))
            settle()
    assert inside == sorted(inside), "first come, first served"
    assert not set(inside) & set(expired)
    assert gate.queued == arrived - len(inside) - len(expired)
    assert (gate.admitted, gate.timed_out) == (len(inside), len(expired))


# -- in front of the engine, in virtual time ----------------------------------------------


def _burst(count: int, output_tokens: int, spacing_s: float = 0.0) -> list[Arrival]:
    return [Arrival(i * spacing_s, 300, output_tokens) for i in range(count)]


def _run(profile: EngineProfile, arrivals: list[Arrival], gate: Gate[Arrival] | None) -> VirtualRun:
    settings = EngineSettings.defaults(profile, max_num_seqs=64)
    run = VirtualRun(Engine(profile, settings), arrivals, gate=gate)
    run.run()
    return run


def test_a_gate_wider_than_the_load_changes_nothing(profile_8b: EngineProfile) -> None:
    arrivals = _burst(100, 50, spacing_s=0.02)
    plain = _run(profile_8b, arrivals, None)
    gated = _run(profile_8b, arrivals, Gate(cap=1000, queue_timeout_s=1.5))
    assert [r.ttft_s for r in gated.finished] == [r.ttft_s for r in plain.finished]
    assert [r.e2e_s for r in gated.finished] == [r.e2e_s for r in plain.finished]
    assert gated.now == plain.now


def test_queue_time_at_the_gate_counts_in_ttft_and_the_cap_bounds_the_engine(
    profile_8b: EngineProfile,
) -> None:
    arrivals = _burst(24, 100)
    run = _run(profile_8b, arrivals, Gate(cap=8, queue_timeout_s=60.0))
    assert len(run.finished) == 24
    assert all(r.outcome is Outcome.COMPLETED for r in run.finished)
    assert all(r.arrived_at == 0.0 for r in run.finished), "the client's arrival, not the engine's"
    assert max(s.running + s.waiting for s in run.samples) <= 8
    ttfts = sorted(r.ttft_s or 0.0 for r in run.finished)
    # Three waves of eight: the last wave waited for two others at the gate.
    one_request = ttfts[0]
    assert ttfts[-1] > 2 * (run.now / 3) > one_request
    for record in run.finished:
        assert record.queue_time_s is not None
        assert record.ttft_s is not None
        assert record.ttft_s >= record.queue_time_s
    assert sum(s.gate_queued for s in run.samples) > 0
    assert {s.gate_cap for s in run.samples} == {8}


def test_requests_that_time_out_at_the_gate_are_rejected_misses(
    profile_8b: EngineProfile,
) -> None:
    # One slot, requests of ~300 steps: the ones behind the first wait past 1.5 s. The late
    # one keeps the run going past a sample or two.
    arrivals = [*_burst(5, 300), Arrival(3.0, 300, 10)]
    run = _run(profile_8b, arrivals, Gate(cap=1, queue_timeout_s=1.5))
    refused = [r for r in run.finished if r.outcome is Outcome.REJECTED]
    assert len(refused) == 4
    for record in refused:
        assert record.reject_reason is RejectReason.QUEUE_TIMEOUT
        assert record.finished_at == pytest.approx(1.5)
        assert record.e2e_s == pytest.approx(1.5)
        assert record.ttft_s is None
    report = build_report(run, profile_8b, run.engine.settings, "burst")
    assert report["requests"] == {"total": 6, "completed": 2, "aborted": 0, "rejected": 4}
    assert report["slo_attainment"] == pytest.approx(2 / 6), "a 503 is a miss, never a win"
    assert sum(s.rejected for s in run.samples) == 4


def test_the_cap_changes_at_any_time_without_a_restart(profile_8b: EngineProfile) -> None:
    arrivals = _burst(40, 400)
    settings = EngineSettings.defaults(profile_8b, max_num_seqs=64)
    run = VirtualRun(Engine(profile_8b, settings), arrivals, gate=Gate(4, 120.0))
    run.run_until(0.5)
    assert run.snapshot().num_running == 4
    run.set_gate_cap(16)  # a raise lets twelve more in at once
    snapshot = run.snapshot()
    assert snapshot.num_running + snapshot.num_waiting == 16
    run.run_until(1.0)
    run.set_gate_cap(2)  # a cut evicts nobody: the sixteen finish
    assert run.gate is not None
    assert run.gate.in_flight == 16
    run.run()
    outcomes = Counter(r.outcome for r in run.finished)
    assert outcomes == {Outcome.COMPLETED: 40}
    assert run.engine.lifetime_totals(run.now).restarts == 0
    late = [s for s in run.samples if s.t > run.samples[-1].t - 5]
    assert max(s.running for s in late) <= 2
    assert [s.gate_cap for s in run.samples][-1] == 2


def test_waited_record_shifts_the_arrival_and_leaves_tpot_alone(
    profile_8b: EngineProfile,
) -> None:
    run = _run(profile_8b, _burst(1, 20), None)
    [record] = run.finished
    shifted = waited_record(record, 0.75)
    assert shifted.arrived_at == record.arrived_at - 0.75
    assert shifted.ttft_s == pytest.approx((record.ttft_s or 0) + 0.75)
    assert shifted.e2e_s == pytest.approx((record.e2e_s or 0) + 0.75)
    assert shifted.tpot_s == record.tpot_s
    assert shifted.prefill_time_s == record.prefill_time_s
    assert waited_record(record, 0.0) is record
