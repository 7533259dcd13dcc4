"""The shifting day whose best token budget moves: its parts are what its header says."""

from __future__ import annotations

import math
import statistics

import pytest

from simulator.arrivals import Arrival
from simulator.shipped import shipped_input
from simulator.synthetic_workloads import WorkloadSpec, generate, load_workload

EIGHT_B = "llama-3.1-8b-h100-tp1"
SEVENTY_B = "llama-3.3-70b-h100-tp4"
PARTS = ((0, 600), (600, 2400), (2400, 4150))  # night, day, evening (s)


def _spec() -> WorkloadSpec:
    # By its shipped name, as `simulate --workload tune-budget-shift` finds it.
    return load_workload(shipped_input("tune-budget-shift"))


def _part(arrivals: list[Arrival], start: float, end: float) -> list[Arrival]:
    return [a for a in arrivals if start <= a.arrived_at < end]


def test_three_parts_follow_each_other_over_sixty_nine_minutes() -> None:
    spec = _spec()
    assert [p.name for p in spec.phases] == ["night", "day", "evening"]
    assert [(p.start_s, p.start_s + p.duration_s) for p in spec.phases] == list(PARTS)
    assert spec.duration_s == 4150
    assert spec.arrivals.cv == 1.5
    assert not spec.bursts


def test_each_part_draws_the_lengths_its_header_gives() -> None:
    arrivals = generate(_spec(), 1, profile=EIGHT_B)
    night, day, evening = (_part(arrivals, start, end) for start, end in PARTS)

    def median(values: list[int]) -> float:
        return statistics.median(values)

    assert median([a.output_tokens for a in night]) == pytest.approx(500, rel=0.15)
    assert median([a.prompt_tokens for a in night]) == pytest.approx(300, rel=0.15)
    assert median([a.prompt_tokens for a in day]) == pytest.approx(4000, rel=0.1)
    assert median([a.output_tokens for a in day]) == pytest.approx(13, rel=0.15)
    assert median([a.prompt_tokens for a in evening]) == pytest.approx(6000, rel=0.1)
    assert median([a.output_tokens for a in evening]) == pytest.approx(60, rel=0.15)


@pytest.mark.parametrize(
    ("profile", "rates"),
    [
        (EIGHT_B, (2.0, 8.0, 6.5)),
        (SEVENTY_B, (1.0, 0.6, 1.0)),
        ("tiny-llama-cpu", (2.0, 17.0, 9.5)),
    ],
)
def test_each_profile_gets_its_own_rate_in_each_part(
    profile: str, rates: tuple[float, float, float]
) -> None:
    spec = _spec()
    arrivals = generate(spec, 1, profile=profile)
    for (start, end), rate in zip(PARTS, rates, strict=True):
        expected = rate * (end - start)
        # A renewal count's spread is about cv * sqrt(n): three of them, whatever the seed.
        spread = 3 * spec.arrivals.cv / math.sqrt(expected)
        measured = len(_part(arrivals, start, end))
        assert measured == pytest.approx(expected, rel=spread), (profile, start)
