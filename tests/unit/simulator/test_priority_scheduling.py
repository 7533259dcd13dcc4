"""``--scheduling-policy priority`` in the simulated scheduler, as vLLM 0.33's V1 scheduler does it.

The rules (``vllm/v1/core/sched/scheduler.py`` and ``request_queue.py``): the waiting queue
is ordered by (priority, arrival), lower first; a request short of KV blocks preempts the
running request with the largest (priority, arrival); a preempted request goes back to its
place in that order. Under FCFS, the default, the same requests are served in arrival order
and the newest running request is preempted, whatever their priorities.
"""

from __future__ import annotations

import pytest

from simulator.arrivals import Arrival
from simulator.engine import Engine
from simulator.profiles import EngineProfile
from simulator.requests import FinishedRequest, Outcome
from simulator.settings import EngineSettings, SchedulingPolicy
from simulator.steps import StepResult
from simulator.virtual_time import VirtualRun

FCFS = SchedulingPolicy.FCFS
PRIORITY = SchedulingPolicy.PRIORITY


class _Steps:
    """Keeps every step's result (the run's observer)."""

    def __init__(self) -> None:
        self.results: list[StepResult] = []

    def step(self, result: StepResult) -> None:
        self.results.append(result)

    def finished(self, record: FinishedRequest) -> None:
        del record


def _run(
    profile: EngineProfile, arrivals: list[Arrival], **settings: object
) -> tuple[dict[str, FinishedRequest], _Steps]:
    steps = _Steps()
    engine = Engine(profile, EngineSettings.defaults(profile, **settings))
    run = VirtualRun(engine, arrivals, observer=steps)
    run.run()
    return {record.request_id: record for record in run.finished}, steps


def _admission_order(records: dict[str, FinishedRequest]) -> list[str]:
    def scheduled_at(request_id: str) -> float:
        record = records[request_id]
        assert record.queue_time_s is not None
        return record.arrived_at + record.queue_time_s

    return sorted(records, key=scheduled_at)


# One request runs at a time (max-num-active-seqs 1); the others queue behind it in arrival
# order, with priorities that do not follow that order.
_QUEUED = [
    Arrival(0.000, 100, 50, priority=0),
    Arrival(0.001, 100, 5, priority=10),
    Arrival(0.002, 100, 5, priority=10),
    Arrival(0.003, 100, 5, priority=0),
    Arrival(0.004, 100, 5, priority=-1),
]


def test_priority_admits_the_lowest_priority_value_first_then_the_earliest(
    profile_8b: EngineProfile,
) -> None:
    records, _ = _run(profile_8b, _QUEUED, max_num_active_seqs=1, scheduling_policy=PRIORITY)
    assert _admission_order(records) == ["cmpl-0", "cmpl-4", "cmpl-3", "cmpl-1", "cmpl-2"]


def test_fcfs_admits_in_arrival_order_whatever_the_priorities(profile_8b: EngineProfile) -> None:
    records, _ = _run(profile_8b, _QUEUED, max_num_active_seqs=1, scheduling_policy=FCFS)
    assert _admission_order(records) == ["cmpl-0", "cmpl-1", "cmpl-2", "cmpl-3", "cmpl-4"]
    default, _ = _run(profile_8b, _QUEUED, max_num_active_seqs=1)
    assert default == records


# 40 blocks of 16 tokens: two requests of 16 + 400 tokens cannot both finish in there, and a
# third, short one waits at the admission cap of 2. The older request, admitted first, is the
# batch one.
_SHORT_OF_KV = [
    Arrival(0.0, 16, 400, priority=5),
    Arrival(0.001, 16, 400, priority=0),
    Arrival(0.01, 16, 10, priority=0),
]


def test_priority_preempts_the_least_urgent_running_request_not_the_newest(
    profile_8b: EngineProfile,
) -> None:
    records, _ = _run(
        profile_8b, _SHORT_OF_KV, num_gpu_blocks=40, max_num_active_seqs=2,
        scheduling_policy=PRIORITY,
    )  # fmt: skip
    batch, online, short = records["cmpl-0"], records["cmpl-1"], records["cmpl-2"]
    assert batch.num_preemptions >= 1
    assert online.num_preemptions == 0
    # The preempted batch request goes back behind the waiting online one, which is admitted
    # next and finishes while the other online request still decodes; the batch one still
    # completes all its tokens (recomputed), last.
    assert short.finished_at < online.finished_at < batch.finished_at
    assert all(record.outcome is Outcome.COMPLETED for record in records.values())
    assert batch.output_tokens == 400


def test_fcfs_preempts_the_newest_and_puts_it_back_in_front(profile_8b: EngineProfile) -> None:
    records, _ = _run(profile_8b, _SHORT_OF_KV, num_gpu_blocks=40, max_num_active_seqs=2)
    first, newest, short = records["cmpl-0"], records["cmpl-1"], records["cmpl-2"]
    assert first.num_preemptions == 0
    assert newest.num_preemptions >= 1
    # Back at the front of the queue, the preempted request takes the free slot before the
    # short one, which waits for the first request to finish.
    assert short.queue_time_s is not None
    assert short.arrived_at + short.queue_time_s >= first.finished_at


def test_a_preempted_victim_gives_back_the_chunk_it_was_given_in_the_step(
    profile_8b: EngineProfile,
) -> None:
    # A 1000-token batch prompt starts alone (400 tokens); a 600-token online one joins it and
    # both go on 200 at a time in 90 blocks. In the fourth step the batch one, first in the
    # running list, takes its blocks and gets its chunk; the online one then finds too few and
    # preempts it (priority): the batch chunk leaves the step, only the online one's is run.
    arrivals = [Arrival(0.0, 1000, 2, priority=5), Arrival(0.001, 600, 2, priority=0)]
    options: dict[str, object] = {
        "num_gpu_blocks": 90,
        "max_num_seqs": 4,
        "max_num_batched_tokens": 400,
        "long_prefill_token_threshold": 200,
        "scheduler_reserve_full_isl": False,
    }
    records, steps = _run(profile_8b, arrivals, scheduling_policy=PRIORITY, **options)
    prefills = [(r.plan.prefill_tokens, r.plan.num_prefills) for r in steps.results[:4]]
    assert prefills == [(400, 1), (400, 2), (400, 2), (200, 1)]
    assert records["cmpl-0"].num_preemptions == 1
    assert records["cmpl-1"].num_preemptions == 0
    assert all(record.outcome is Outcome.COMPLETED for record in records.values())
    # FCFS: the online one, the newest, preempts itself; the batch chunk stays.
    records, steps = _run(profile_8b, arrivals, **options)
    prefills = [(r.plan.prefill_tokens, r.plan.num_prefills) for r in steps.results[:4]]
    assert prefills == [(400, 1), (400, 2), (400, 2), (200, 1)]
    assert records["cmpl-0"].num_preemptions == 0
    assert records["cmpl-1"].num_preemptions == 1


def test_a_least_urgent_prefill_that_preempts_itself_lets_the_next_one_run(
    profile_8b: EngineProfile,
) -> None:
    # As above in 80 blocks: in the fourth step the batch prompt, first in the running list,
    # finds too few blocks and is itself the least urgent running request, so it preempts
    # itself; the online one after it still runs in what that freed (priority). Under FCFS
    # the batch one preempts the newest, the online one, and goes on.
    arrivals = [Arrival(0.0, 1000, 2, priority=5), Arrival(0.001, 600, 2, priority=0)]
    options: dict[str, object] = {
        "num_gpu_blocks": 80,
        "max_num_seqs": 4,
        "max_num_batched_tokens": 400,
        "long_prefill_token_threshold": 200,
        "scheduler_reserve_full_isl": False,
    }
    records, steps = _run(profile_8b, arrivals, scheduling_policy=PRIORITY, **options)
    prefills = [(r.plan.prefill_tokens, r.plan.num_prefills) for r in steps.results[:4]]
    assert prefills == [(400, 1), (400, 2), (400, 2), (200, 1)]
    assert (records["cmpl-0"].num_preemptions, records["cmpl-1"].num_preemptions) == (1, 0)
    records, _ = _run(profile_8b, arrivals, **options)
    assert (records["cmpl-0"].num_preemptions, records["cmpl-1"].num_preemptions) == (0, 1)


def test_admission_never_preempts_a_running_request_even_a_less_urgent_one(
    profile_8b: EngineProfile,
) -> None:
    # The batch request runs; the online one (39 blocks) does not fit beside it and waits for
    # it to finish: vLLM evicts only to let a running request grow, never to admit.
    arrivals = [Arrival(0.0, 16, 200, priority=5), Arrival(0.01, 620, 2, priority=0)]
    records, _ = _run(profile_8b, arrivals, num_gpu_blocks=40, scheduling_policy=PRIORITY)
    batch, online = records["cmpl-0"], records["cmpl-1"]
    assert batch.num_preemptions == 0
    assert online.queue_time_s is not None
    assert online.arrived_at + online.queue_time_s >= batch.finished_at


@pytest.mark.parametrize("policy", [FCFS, PRIORITY])
def test_equal_priorities_are_served_the_same_under_both_policies(
    profile_8b: EngineProfile, policy: SchedulingPolicy
) -> None:
    arrivals = [Arrival(i * 0.002, 200, 100) for i in range(40)]
    records, _ = _run(profile_8b, arrivals, num_gpu_blocks=300, scheduling_policy=policy)
    baseline, _ = _run(profile_8b, arrivals, num_gpu_blocks=300)
    assert records == baseline
