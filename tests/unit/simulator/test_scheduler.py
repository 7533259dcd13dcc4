"""The scheduling rules of vLLM V1 that the simulated engine reproduces, one by one."""

from __future__ import annotations

import pytest

from simulator.arrivals import Arrival
from simulator.engine import Engine
from simulator.profiles import EngineProfile
from simulator.requests import FinishedRequest, Outcome, RejectReason
from simulator.settings import EngineSettings
from simulator.virtual_time import VirtualRun


def _run(
    profile: EngineProfile, arrivals: list[Arrival], **settings: object
) -> tuple[VirtualRun, dict[str, FinishedRequest]]:
    run = VirtualRun(Engine(profile, EngineSettings.defaults(profile, **settings)), arrivals)
    run.run()
    return run, {record.request_id: record for record in run.finished}


def test_one_request_gets_exactly_the_profiles_step_times(profile_8b: EngineProfile) -> None:
    _, records = _run(profile_8b, [Arrival(0.0, 100, 3)])
    record = records["cmpl-0"]
    prefill = profile_8b.step_time_s(100, 0, 0)
    decodes = [profile_8b.step_time_s(0, 1, 100), profile_8b.step_time_s(0, 1, 101)]
    assert record.outcome is Outcome.COMPLETED
    assert record.finished_reason == "stop"
    assert record.queue_time_s == 0.0
    assert record.ttft_s == pytest.approx(prefill)
    assert record.e2e_s == pytest.approx(prefill + sum(decodes))
    assert record.tpot_s == pytest.approx(sum(decodes) / 2)
    assert record.output_tokens == 3


def test_a_long_prompt_is_chunked_by_the_token_budget(profile_8b: EngineProfile) -> None:
    _, records = _run(profile_8b, [Arrival(0.0, 20_000, 1)])
    chunks = [(8192, 0), (8192, 8192), (3616, 16384)]
    expected = sum(profile_8b.step_time_s(p, 0, context) for p, context in chunks)
    assert records["cmpl-0"].ttft_s == pytest.approx(expected)


def test_without_chunked_prefill_a_prompt_must_fit_the_budget(profile_8b: EngineProfile) -> None:
    arrivals = [Arrival(0.0, 3000, 2), Arrival(0.0, 3000, 2)]
    _, records = _run(
        profile_8b, arrivals, max_num_batched_tokens=4096, enable_chunked_prefill=False
    )
    # The second prompt does not fit what the first left of the budget: it waits a step.
    assert records["cmpl-1"].queue_time_s == pytest.approx(profile_8b.step_time_s(3000, 0, 0))


def test_the_long_prefill_threshold_caps_chunks_only_when_others_wait(
    profile_8b: EngineProfile,
) -> None:
    _, alone = _run(profile_8b, [Arrival(0.0, 4000, 1)], long_prefill_token_threshold=1000)
    assert alone["cmpl-0"].ttft_s == pytest.approx(profile_8b.step_time_s(4000, 0, 0))
    _, shared = _run(
        profile_8b,
        [Arrival(0.0, 4000, 1), Arrival(0.0, 4000, 1)],
        long_prefill_token_threshold=1000,
    )
    # Both advance 1000 tokens a step: four steps of 2000 prefill tokens each.
    steps = [profile_8b.step_time_s(2000, 0, 2000 * k) for k in range(4)]
    assert shared["cmpl-0"].ttft_s == pytest.approx(sum(steps))
    assert shared["cmpl-1"].ttft_s == pytest.approx(sum(steps))


def test_prefill_schedule_interval_holds_new_prefills_while_something_decodes(
    profile_8b: EngineProfile,
) -> None:
    step = profile_8b.step_time_s(0, 1, 100)
    late = Arrival(0.5 * step + profile_8b.step_time_s(100, 0, 0), 100, 2)
    _, every_step = _run(profile_8b, [Arrival(0.0, 100, 50), late])
    _, every_fourth = _run(profile_8b, [Arrival(0.0, 100, 50), late], prefill_schedule_interval=4)
    assert every_step["cmpl-1"].queue_time_s == pytest.approx(0.5 * step, rel=0.01)
    # The first prefill was step 1, the request arrives in step 2, and the next prefill may
    # only come at step 5: it waits out steps 3 and 4 too.
    assert every_fourth["cmpl-1"].queue_time_s == pytest.approx(2.5 * step, rel=0.01)


def test_the_admission_cap_bounds_running_requests(profile_8b: EngineProfile) -> None:
    arrivals = [Arrival(0.0, 100, 200) for _ in range(20)]
    run, _ = _run(profile_8b, arrivals, max_num_seqs=16, max_num_active_seqs=4)
    assert max(sample.running for sample in run.samples) <= 4
    assert run.engine.lifetime_totals(run.now).outcomes["completed"] == 20


def test_the_newest_running_request_is_preempted_and_recomputed(
    profile_8b: EngineProfile,
) -> None:
    # 40 blocks of 16 tokens; two requests of 16 + 400 tokens cannot both finish in there.
    arrivals = [Arrival(0.0, 16, 400), Arrival(0.0, 16, 400)]
    run, records = _run(profile_8b, arrivals, num_gpu_blocks=40)
    assert records["cmpl-0"].num_preemptions == 0
    assert records["cmpl-1"].num_preemptions >= 1
    assert run.engine.lifetime_totals(run.now).preemptions == records["cmpl-1"].num_preemptions
    # Recomputation keeps the tokens already sent: the request still ends with 400.
    assert records["cmpl-1"].output_tokens == 400
    assert records["cmpl-1"].outcome is Outcome.COMPLETED


def test_a_watermark_keeps_blocks_free_at_admission(profile_8b: EngineProfile) -> None:
    # 100 blocks; the first request holds 50. The second needs 40: it fits, but not with a
    # 20 % watermark (20 blocks) on top, so it waits for the first to finish.
    arrivals = [Arrival(0.0, 800, 20), Arrival(0.001, 640, 2)]
    _, plain = _run(profile_8b, arrivals, num_gpu_blocks=100)
    _, guarded = _run(profile_8b, arrivals, num_gpu_blocks=100, watermark=0.2)
    assert plain["cmpl-1"].queue_time_s is not None
    assert guarded["cmpl-1"].queue_time_s is not None
    first_e2e = guarded["cmpl-0"].e2e_s
    assert first_e2e is not None
    assert plain["cmpl-1"].queue_time_s < 0.05
    assert guarded["cmpl-1"].queue_time_s >= first_e2e - 0.001 - 1e-9


def test_requests_that_can_never_fit_or_exceed_a_queue_limit_are_rejected(
    profile_8b: EngineProfile,
) -> None:
    arrivals = [Arrival(0.0, 10, 5), Arrival(0.0, 10, 5), Arrival(0.0, 10, 5), Arrival(1.0, 700, 1)]
    run, records = _run(profile_8b, arrivals, num_gpu_blocks=40, max_num_queued_reqs=2)
    reasons = {rid: r.reject_reason for rid, r in records.items()}
    assert reasons == {
        "cmpl-0": None,
        "cmpl-1": None,
        "cmpl-2": RejectReason.MAX_NUM_QUEUED_REQS,
        "cmpl-3": RejectReason.TOO_LONG,
    }
    counters = run.engine.counters
    assert counters is not None
    assert counters.admission_rejections["max_num_queued_reqs"] == 1
