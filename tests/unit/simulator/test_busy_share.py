"""The GPU busy share: the time the engine spends in steps, over the run and per sample."""

from __future__ import annotations

import pytest

from simulator.arrivals import Arrival
from simulator.engine import Engine
from simulator.profiles import EngineProfile
from simulator.settings import EngineSettings
from simulator.virtual_time import VirtualRun


def test_the_samples_busy_shares_add_up_to_the_time_spent_in_steps(
    profile_8b: EngineProfile,
) -> None:
    # Two bursts of work with idle time between them and after them.
    arrivals = [Arrival(0.0, 2000, 300), Arrival(10.0, 2000, 300)]
    run = VirtualRun(Engine(profile_8b, EngineSettings.defaults(profile_8b)), arrivals)
    run.run_until(20.0)
    busy = run.engine.lifetime_totals(run.now).busy_s
    one = profile_8b.step_time_s(2000, 0, 0) + sum(
        profile_8b.step_time_s(0, 1, 2000 + n) for n in range(299)
    )
    assert busy == pytest.approx(2 * one)
    # The first burst ends before the sample at 2 s, the samples then idle until 10 s. (The run
    # stops at its last completion, so the grid ends there.)
    first = [sample for sample in run.samples if sample.t <= 9.0]
    assert sum(sample.busy_share for sample in first) == pytest.approx(one, abs=1e-5)
    assert [sample.busy_share for sample in first[2:]] == [0.0] * 7
    assert all(0.0 <= sample.busy_share <= 1.0 for sample in run.samples)
