"""The proof's workload: ramps, named phases and a per-profile rate scale."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.synthetic_workloads import generate, load_workload

ROOT = Path(__file__).resolve().parents[3]
PROOF = ROOT / "simulator" / "workloads" / "proof-four-phases.yaml"


def _rate(arrivals: list[float], start: float, end: float) -> float:
    return sum(1 for at in arrivals if start <= at < end) / (end - start)


def test_the_four_phases_cover_seventy_minutes_in_order() -> None:
    spec = load_workload(PROOF)
    names = [p.name for p in spec.phases]
    assert names == ["steady", "diurnal-ramp", "bursts", "long-tail"]
    ends = [p.start_s + p.duration_s for p in spec.phases]
    assert [p.start_s for p in spec.phases[1:]] == ends[:-1]
    assert ends[-1] == spec.duration_s == 4200
    assert max(b.multiplier for b in spec.bursts) == 3.0


def test_the_ramp_raises_the_rate_and_the_profile_scale_lowers_it() -> None:
    spec = load_workload(PROOF)
    times = [a.arrived_at for a in generate(spec, 1)]
    steady = _rate(times, 0, 900)
    assert steady == pytest.approx(14.1, rel=0.05)
    assert _rate(times, 1380, 1620) == pytest.approx(14.1 * 1.45, rel=0.08)
    assert _rate(times, 2160, 2280) == pytest.approx(14.1 * 2, rel=0.08)
    scale = spec.rate_scale_for("llama-3.3-70b-h100-tp4")
    scaled = [a.arrived_at for a in generate(spec, 1, rate_scale=scale)]
    assert _rate(scaled, 0, 900) == pytest.approx(14.1 * scale, rel=0.08)
    assert spec.rate_scale_for("another-profile") == 1.0


def test_the_long_tail_phase_runs_each_profile_at_its_own_share_of_capacity() -> None:
    # 0.6 of the long-tail mix's measured capacity: 8.5 rps on the 8B, 4.0 rps on the 70B.
    spec = load_workload(PROOF)
    small = [a.arrived_at for a in generate(spec, 1, profile="llama-3.1-8b-h100-tp1")]
    assert _rate(small, 3000, 4200) == pytest.approx(0.6 * 8.5, rel=0.08)
    profile = "llama-3.3-70b-h100-tp4"
    large = generate(spec, 1, rate_scale=spec.rate_scale_for(profile), profile=profile)
    assert _rate([a.arrived_at for a in large], 3000, 4200) == pytest.approx(0.6 * 4.0, rel=0.08)
    # A profile the spec does not name keeps the base rate there: the ramps are per profile.
    other = [a.arrived_at for a in generate(spec, 1, profile="another-profile")]
    assert _rate(other, 3000, 4200) == pytest.approx(14.1, rel=0.08)


def test_long_outputs_come_only_in_the_long_tail_phase() -> None:
    spec = load_workload(PROOF)
    arrivals = generate(spec, 2)
    long = [a for a in arrivals if a.output_tokens == 4096]
    assert long
    assert all(a.arrived_at >= 3000 for a in long)
    tail = [a for a in arrivals if a.arrived_at >= 3000]
    assert len(long) / len(tail) == pytest.approx(0.1, abs=0.02)
