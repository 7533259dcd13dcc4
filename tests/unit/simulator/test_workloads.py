from __future__ import annotations

import itertools
import statistics
from pathlib import Path

import pytest

from simulator.errors import SpecError
from simulator.synthetic_workloads import WorkloadSpec, generate, load_workload
from simulator.trace_replay import read_trace

ROOT = Path(__file__).resolve().parents[3]
TRACE = ROOT / "simulator/traces/azure-llm-2023-conv.csv"
SPEC = ROOT / "simulator/workloads/burst-and-long-outputs.yaml"


def test_the_shared_trace_replays_every_request() -> None:
    arrivals = read_trace(TRACE)
    assert len(arrivals) == 19_366
    assert arrivals[0].arrived_at == 0.0
    assert 3400 < arrivals[-1].arrived_at < 3600
    assert statistics.median(a.prompt_tokens for a in arrivals) == pytest.approx(1020, abs=5)
    assert max(a.output_tokens for a in arrivals) == 1000


def test_the_trace_travels_with_its_attribution() -> None:
    readme = (ROOT / "simulator/traces/README.md").read_text()
    assert "CC-BY 4.0" in readme
    assert "microsoft/vidur" in readme
    assert "(MIT)" in readme


def _trace(tmp_path: Path, rows: str) -> Path:
    path = tmp_path / "t.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + rows)
    return path


def test_time_scale_stretches_and_rate_scale_keeps_the_duration(tmp_path: Path) -> None:
    path = _trace(tmp_path, "".join(f"{i}.0,100,10\n" for i in range(100)))
    assert [a.arrived_at for a in read_trace(path, time_scale=0.5)][:3] == [0.0, 0.5, 1.0]
    doubled = read_trace(path, rate_scale=2.0)
    assert len(doubled) == 200
    assert [a.arrived_at for a in doubled][:4] == [0.0, 0.5, 1.0, 1.5]
    thinned = read_trace(path, rate_scale=0.5, seed=3)
    assert 30 < len(thinned) < 70
    assert thinned == read_trace(path, rate_scale=0.5, seed=3)
    assert thinned != read_trace(path, rate_scale=0.5, seed=4)


def test_broken_trace_rows_are_reported_by_line(tmp_path: Path) -> None:
    path = _trace(tmp_path, "1.0,100,10\n0.5,100,10\n2.0,0,10\n3.0,1\n4.0,abc,10\n")
    with pytest.raises(SpecError) as caught:
        read_trace(path)
    lines = [issue.line for issue in caught.value.issues]
    assert lines == [3, 4, 5, 6]
    assert "arrivals must not go back" in caught.value.issues[0].message
    assert "at least 1" in caught.value.issues[1].message
    assert "expected 3 columns" in caught.value.issues[2].message


def test_a_trace_needs_the_vidur_header(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("time,prompt,output\n0,1,1\n")
    with pytest.raises(SpecError, match="header must be arrived_at,num_prefill_tokens"):
        read_trace(path)


def test_the_shipped_spec_is_valid_and_deterministic() -> None:
    spec = load_workload(SPEC)
    first = generate(spec)
    assert first == generate(spec)
    assert first != generate(spec, seed=8)
    assert 0.9 * 5.5 * 1800 < len(first) < 1.5 * 5.5 * 1800


def _spec(**changes: object) -> WorkloadSpec:
    base: dict[str, object] = {
        "name": "t",
        "duration_s": 600,
        "arrivals": {"rate_rps": 5.0, "cv": 1.1},
        "prompt_tokens": {"median": 1020, "p90": 2734, "max": 8192},
        "output_tokens": {"median": 129, "p90": 424, "max": 1000},
    }
    base.update(changes)
    return WorkloadSpec.model_validate(base)


def test_lengths_follow_the_fitted_quantiles() -> None:
    arrivals = generate(_spec(duration_s=2000), seed=1)
    prompts = sorted(a.prompt_tokens for a in arrivals)
    outputs = sorted(a.output_tokens for a in arrivals)
    # ~10k draws: the sample median and p90 lie within a few percent of the fitted ones.
    assert statistics.median(prompts) == pytest.approx(1020, rel=0.06)
    assert prompts[int(0.9 * len(prompts))] == pytest.approx(2734, rel=0.08)
    assert statistics.median(outputs) == pytest.approx(129, rel=0.06)
    assert max(outputs) <= 1000


def test_arrivals_have_the_rate_and_cv_asked_for() -> None:
    arrivals = generate(_spec(duration_s=4000), seed=2)
    gaps = [b.arrived_at - a.arrived_at for a, b in itertools.pairwise(arrivals)]
    assert len(arrivals) / 4000 == pytest.approx(5.0, rel=0.05)
    assert statistics.stdev(gaps) / statistics.mean(gaps) == pytest.approx(1.1, rel=0.08)


def test_a_burst_multiplies_the_rate_inside_its_window_only() -> None:
    spec = _spec(bursts=[{"start_s": 200, "duration_s": 100, "multiplier": 3}])
    arrivals = generate(spec, seed=5)
    inside = sum(1 for a in arrivals if 200 <= a.arrived_at < 300)
    before = sum(1 for a in arrivals if 0 <= a.arrived_at < 200)
    assert inside / 100 == pytest.approx(15.0, rel=0.2)
    assert before / 200 == pytest.approx(5.0, rel=0.2)


def test_a_wave_of_long_outputs_stays_in_its_window_and_moves_no_arrival() -> None:
    plain = generate(_spec(), seed=9)
    wave = generate(
        _spec(long_outputs={"share": 0.2, "tokens": 4096, "start_s": 300, "duration_s": 100}),
        seed=9,
    )
    assert [a.arrived_at for a in plain] == [a.arrived_at for a in wave]
    longs = [a for a in wave if a.output_tokens == 4096]
    in_window = [a for a in wave if 300 <= a.arrived_at < 400]
    assert all(300 <= a.arrived_at < 400 for a in longs)
    assert len(longs) / len(in_window) == pytest.approx(0.2, abs=0.07)


def test_spec_errors_name_the_key_and_its_line(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        SPEC.read_text()
        .replace("rate_rps: 5.5", "rate_rps: -1")
        .replace("multiplier: 2.5}", "multiplier: 2.5, shape: square}")
    )
    with pytest.raises(SpecError) as caught:
        load_workload(path)
    found = {issue.key: issue for issue in caught.value.issues}
    assert set(found) == {"arrivals.rate_rps", "bursts.0.shape"}
    assert found["arrivals.rate_rps"].message.startswith("Input should be greater than 0")
    assert found["bursts.0.shape"].message.startswith("unknown key (allowed here: duration_s")
    lines = path.read_text().splitlines()
    assert "rate_rps" in lines[found["arrivals.rate_rps"].line - 1]
    assert "shape" in lines[found["bursts.0.shape"].line - 1]


def test_lengths_need_p90_above_the_median() -> None:
    with pytest.raises(ValueError, match="p90 must be greater than median"):
        _spec(prompt_tokens={"median": 100, "p90": 50, "max": 10})
