from __future__ import annotations

from collections import Counter

from daemon.sources.vllm_vocabulary import BY_NAME, KNOWN_UNUSED_FAMILIES, SIGNALS, Kind


def test_names_follow_the_convention() -> None:
    for signal in SIGNALS:
        assert signal.name.startswith("vllm_"), signal.name
        assert signal.name.endswith("_total") == (signal.kind is Kind.COUNTER), signal.name
        assert (signal.kind is Kind.INFO) == bool(signal.info_label), signal.name
        assert signal.families, signal.name
    assert len(BY_NAME) == len(SIGNALS)


def test_a_vllm_family_feeds_one_signal_except_info_families() -> None:
    uses = Counter(family for s in SIGNALS if s.kind is not Kind.INFO for family in s.families)
    assert [family for family, count in uses.items() if count > 1] == []
    assert not set(uses) & KNOWN_UNUSED_FAMILIES


def test_the_names_policies_rely_on_exist() -> None:
    assert {
        "vllm_num_requests_running",
        "vllm_num_requests_waiting",
        "vllm_kv_cache_usage_ratio",
        "vllm_num_preemptions_total",
        "vllm_generation_tokens_total",
        "vllm_ttft_seconds",
        "vllm_itl_seconds",
        "vllm_num_gpu_blocks",
        "vllm_gpu_memory_utilization",
    } <= set(BY_NAME)
