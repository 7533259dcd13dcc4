"""The per-request length and per-step token histograms, read off a real vLLM 0.32 page.

The what-if (issue 16) characterises a workload from ``vllm:request_prompt_tokens`` and
``vllm:request_generation_tokens`` and checks the engine profile against
``vllm:iteration_tokens_total``; the capture is 40 concurrent 200-token requests of ~10-token
prompts on a real server (``tests/fixtures/vllm-metrics/real-0.32-cpu/preempting.txt``).
"""

from __future__ import annotations

from tests.unit.sources.vllm_pages import FIXTURES, labels, parse, values

REAL_0_32 = (FIXTURES / "real-0.32-cpu" / "preempting.txt").read_text()


def test_a_real_page_gives_the_length_and_step_histograms() -> None:
    scrape = parse(REAL_0_32)
    aggregate = labels(model_name="tiny")

    assert values(scrape, "vllm_request_prompt_tokens_count")[aggregate] == 40
    assert values(scrape, "vllm_request_prompt_tokens_sum")[aggregate] == 383
    assert values(scrape, "vllm_request_generation_tokens_sum")[aggregate] == 8000
    assert values(scrape, "vllm_iteration_tokens_count")[aggregate] == 918
    prompt_buckets = {
        dict(key)["le"]: value
        for key, value in values(scrape, "vllm_request_prompt_tokens_bucket").items()
        if "engine" not in dict(key)
    }
    assert prompt_buckets["5.0"] == 0
    assert prompt_buckets["10.0"] == 40
    assert prompt_buckets["+Inf"] == 40
    mapped = {"vllm:request_prompt_tokens", "vllm:request_generation_tokens"}
    assert not mapped & scrape.unknown_families
