"""Invariants of the engine under arbitrary small workloads and settings (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.arrivals import Arrival
from simulator.engine import Engine, Phase
from simulator.profiles import EngineProfile, load_profile
from simulator.requests import Outcome
from simulator.settings import EngineSettings
from simulator.virtual_time import VirtualRun

PROFILE: EngineProfile = load_profile("llama-3.1-8b-h100-tp1")

arrivals_strategy = st.lists(
    st.builds(
        Arrival,
        arrived_at=st.floats(0.0, 2.0),
        prompt_tokens=st.integers(1, 600),
        output_tokens=st.integers(1, 300),
    ),
    min_size=1,
    max_size=40,
).map(sorted)

settings_strategy = st.builds(
    lambda seqs, extra_budget, active, blocks, watermark, interval, threshold, chunked: (
        EngineSettings.defaults(
            PROFILE,
            max_num_seqs=seqs,
            max_num_batched_tokens=seqs + extra_budget,
            max_num_active_seqs=min(active, seqs) if active else None,
            num_gpu_blocks=blocks,
            watermark=watermark,
            prefill_schedule_interval=interval,
            long_prefill_token_threshold=threshold,
            enable_chunked_prefill=chunked,
        )
    ),
    st.integers(1, 16),
    st.integers(0, 1024),
    st.integers(0, 16),
    st.integers(8, 120),
    st.sampled_from([0.0, 0.05, 0.2]),
    st.integers(1, 4),
    st.sampled_from([0, 64, 256]),
    st.booleans(),
)


def _check_kv(engine: Engine) -> None:
    scheduler = engine.scheduler
    assert scheduler is not None
    held = sum(request.blocks for request in scheduler.in_flight())
    assert scheduler.kv.used == held
    assert 0 <= scheduler.kv.used <= scheduler.kv.num_blocks
    assert scheduler.num_running <= scheduler.settings.admission_cap


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    arrivals=arrivals_strategy,
    engine_settings=settings_strategy,
    abort_every=st.sampled_from([0, 3, 17]),
)
def test_blocks_are_accounted_and_every_request_ends_exactly_once(
    arrivals: list[Arrival], engine_settings: EngineSettings, abort_every: int
) -> None:
    engine = Engine(PROFILE, engine_settings)
    now = 0.0
    pending = list(arrivals)
    steps = 0
    while pending or engine.has_work:
        steps += 1
        scheduler = engine.scheduler
        if abort_every and steps % abort_every == 0 and scheduler and scheduler.in_flight():
            # A client goes away: any request, running or waiting, in any phase.
            victims = scheduler.in_flight()
            engine.abort(victims[steps % len(victims)], now)
            _check_kv(engine)
        while pending and pending[0].arrived_at <= now:
            arrival = pending.pop(0)
            engine.submit(arrival.prompt_tokens, arrival.output_tokens, arrival.arrived_at)
        plan = engine.begin_step(now)
        if plan is None:
            assert not engine.has_work, "the engine stalled with work to do"
            if not pending:
                break
            now = pending[0].arrived_at
            continue
        _check_kv(engine)
        assert plan.prefill_tokens + plan.decode_tokens <= engine_settings.max_num_batched_tokens
        engine.end_step()
        _check_kv(engine)
        now = plan.ends_at
    records = engine.take_finished()
    assert sorted(r.request_id for r in records) == sorted(
        f"cmpl-{i}" for i in range(len(arrivals))
    )
    by_id = {r.request_id: r for r in records}
    for index, arrival in enumerate(arrivals):
        record = by_id[f"cmpl-{index}"]
        if record.outcome is Outcome.COMPLETED:
            assert record.output_tokens == arrival.output_tokens
            assert record.ttft_s is not None
            assert record.e2e_s is not None
            assert record.queue_time_s is not None
            assert 0 <= record.queue_time_s <= record.ttft_s <= record.e2e_s
        elif record.outcome is Outcome.ABORTED:
            assert abort_every
        else:
            assert record.outcome is Outcome.REJECTED
    assert engine.scheduler is not None
    assert engine.scheduler.kv.used == 0


@settings(max_examples=30, deadline=None)
@given(
    arrivals=arrivals_strategy,
    restart_at=st.floats(0.0, 2.0),
    drain=st.sampled_from([0, 1]),
    new_seqs=st.integers(1, 8),
)
def test_a_restart_at_any_time_still_ends_every_request_once(
    arrivals: list[Arrival], restart_at: float, drain: int, new_seqs: int
) -> None:
    first = EngineSettings.defaults(PROFILE, num_gpu_blocks=60, shutdown_timeout=drain)
    run = VirtualRun(Engine(PROFILE, first), arrivals)
    run.run_until(restart_at)
    if run.engine.phase is Phase.SERVING:
        run.restart(EngineSettings.defaults(PROFILE, num_gpu_blocks=60, max_num_seqs=new_seqs))
    run.run()
    ids = [r.request_id for r in run.finished]
    assert len(ids) == len(set(ids)) == len(arrivals)
    totals = run.engine.lifetime_totals(run.now)
    assert sum(totals.outcomes.values()) == len(arrivals)
