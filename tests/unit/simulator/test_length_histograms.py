"""The simulated server's per-request length histograms, against a real vLLM 0.32 page.

``request_prompt_tokens`` and ``request_generation_tokens`` are what the what-if planner
characterises a workload from (issue 16); the simulator must render them as vLLM does, or a
planner tested on the simulator would read a shape no real server shows.
"""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from simulator.engine import Engine
from simulator.profiles import load_profile
from simulator.requests import FinishedRequest, Outcome
from simulator.server.histograms import one_two_five_buckets
from simulator.server.metrics import DEFAULT_MAX_MODEL_LEN, VllmMetrics
from simulator.settings import EngineSettings

REAL = Path(__file__).resolve().parents[2] / "fixtures/vllm-metrics/real-0.32-cpu/preempting.txt"
FAMILIES = ("request_prompt_tokens", "request_generation_tokens")


class _Zero:
    def now(self) -> float:
        return 0.0


def _page(ignored: tuple[tuple[str, str], ...], *records: FinishedRequest) -> str:
    profile = load_profile("llama-3.1-8b-h100-tp1")
    engine = Engine(profile, EngineSettings.defaults(profile, ignored=ignored))
    metrics = VllmMetrics(engine, _Zero(), created=0.0)
    for record in records:
        metrics.observe_finished(record, record.finished_reason or "")
    registry = CollectorRegistry()
    registry.register(metrics)
    return generate_latest(registry).decode()


def _bounds(text: str, family: str) -> list[str]:
    return re.findall(rf'vllm:{family}_bucket\{{[^}}]*le="([^"]+)"', text)


def _record(prompt: int, output: int, outcome: Outcome) -> FinishedRequest:
    return FinishedRequest("r", 0.0, 1.0, prompt, output, outcome)


def test_bounds_are_vllms_1_2_5_series_up_to_max_model_len_as_a_real_page_shows() -> None:
    # The real capture ran a tiny model whose context (max_model_len) was 1,024 tokens.
    page = _page((("max-model-len", "1024"),))
    real = REAL.read_text()
    for family in FAMILIES:
        assert _bounds(page, family) == _bounds(real, family)
        assert f"# HELP vllm:{family} Number of" in page
    default = _page(())
    assert _bounds(default, FAMILIES[0])[-2:] == ["100000.0", "+Inf"]
    assert one_two_five_buckets(DEFAULT_MAX_MODEL_LEN)[-1] == 100_000


def test_completed_and_aborted_requests_are_observed_rejected_ones_are_not() -> None:
    page = _page(
        (),
        _record(300, 40, Outcome.COMPLETED),
        _record(3000, 7, Outcome.ABORTED),
        _record(5, 0, Outcome.REJECTED),
    )
    assert 'vllm:request_prompt_tokens_count{engine="0",model_name=' in page
    assert re.search(r"vllm:request_prompt_tokens_count\{[^}]*\} 2\.0", page)
    assert re.search(r"vllm:request_prompt_tokens_sum\{[^}]*\} 3300\.0", page)
    assert re.search(r"vllm:request_generation_tokens_sum\{[^}]*\} 47\.0", page)
    assert re.search(r'vllm:request_prompt_tokens_bucket\{[^}]*le="500.0"[^}]*\} 1\.0', page)
