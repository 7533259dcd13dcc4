"""On a virtual clock a tune round runs in process; a worker process would be timed out (issue 16).

A :class:`~daemon.core.virtual_time.VirtualTimeLoop` jumps its clock over every wait, the wait
for a worker process included, which runs in real time meanwhile: the round's 150 s bound
passes at once and the round is stopped. ``simulate`` therefore gives its governor
:data:`~daemon.engine.evaluation.tuner.IN_PROCESS`, where a round takes no virtual time.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from daemon.core.virtual_time import run_in_virtual_time
from daemon.engine.evaluation.policy_ledger import PolicyLedger
from daemon.engine.evaluation.tuner import IN_PROCESS, OFF_LOOP, WhatIfRunner
from daemon.engine.storage.state_store import StateStore
from daemon.policy.decisions import Decision, DecisionKind
from tests.engine.test_tuner import Clock, _due, _tuner


def _round_on_a_virtual_clock(tmp_path: Path, runner: WhatIfRunner) -> tuple[Decision, float]:
    """The round's first decision, and the virtual seconds it took."""

    async def main() -> tuple[Decision, float]:
        loop = asyncio.get_running_loop()

        async def ticking() -> None:  # the governor's other tasks keep timers pending
            while True:
                await asyncio.sleep(1.0)

        beside = asyncio.create_task(ticking())
        store = StateStore(tmp_path / f"{id(runner)}.sqlite3")
        try:
            tuner = _tuner(tmp_path, PolicyLedger(store, Clock()), [], runner=runner)
            started = loop.time()
            first, *_ = await tuner.run_one(_due())
            return first, loop.time() - started
        finally:
            beside.cancel()
            await asyncio.gather(beside, return_exceptions=True)
            store.close()

    return run_in_virtual_time(main())


def test_a_worker_process_is_timed_out_by_a_virtual_clock(tmp_path: Path) -> None:
    decision, took_s = _round_on_a_virtual_clock(tmp_path, OFF_LOOP)

    assert decision.kind is DecisionKind.BLOCKED
    assert decision.guard == "whatif_failed"
    assert "took longer than 150 s" in decision.details["reason"]
    assert took_s >= 150.0


def test_in_process_the_round_answers_and_takes_no_virtual_time(tmp_path: Path) -> None:
    decision, took_s = _round_on_a_virtual_clock(tmp_path, IN_PROCESS)

    assert decision.kind is DecisionKind.INTENT
    assert decision.intent is not None
    assert decision.intent.changes["max_num_batched_tokens"] < 8192
    assert took_s == 0.0
