from __future__ import annotations

import random

from daemon.core.backoff import Backoff


def test_delays_grow_with_jitter_up_to_the_cap_and_reset() -> None:
    backoff = Backoff(base_s=1.0, cap_s=8.0, rng=random.Random(7))
    delays = [backoff.next_delay() for _ in range(6)]
    bounds = [1, 2, 4, 8, 8, 8]
    for delay, bound in zip(delays, bounds, strict=True):
        assert bound / 2 <= delay <= bound
    assert len(set(delays)) == len(delays), "jitter must spread the delays"
    backoff.reset()
    assert backoff.next_delay() <= 1.0


def test_two_governors_do_not_retry_in_step() -> None:
    one, two = Backoff(rng=random.Random(1)), Backoff(rng=random.Random(2))
    assert [one.next_delay() for _ in range(5)] != [two.next_delay() for _ in range(5)]
