from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from daemon.core.errors import MetricsParseError
from daemon.sources.vllm_metrics import parse_vllm_metrics
from tests.unit.sources.vllm_pages import (
    QWEN,
    V0,
    V0_33,
    V0_33_DP2,
    V1_0_10,
    labels,
    parse,
    values,
)

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
GLM = "zai-org/GLM-4.5"


def test_v0_docs_excerpt_without_engine_label_gives_the_aggregate_only() -> None:
    scrape = parse(V0)
    model = labels(model_name=LLAMA)
    assert values(scrape, "vllm_num_requests_running") == {model: 8.0}
    assert values(scrape, "vllm_generation_tokens_total") == {model: 27453.0}
    assert values(scrape, "vllm_request_success_total") == {
        labels(model_name=LLAMA, finished_reason="stop"): 1.0,
        labels(model_name=LLAMA, finished_reason="length"): 131.0,
        labels(model_name=LLAMA, finished_reason="abort"): 0.0,
    }
    buckets = values(scrape, "vllm_ttft_seconds_bucket")
    assert buckets[labels(model_name=LLAMA, le="0.04")] == 97.0
    assert buckets[labels(model_name=LLAMA, le="0.1")] == 140.0
    assert len(buckets) == 8
    assert values(scrape, "vllm_ttft_seconds_count") == {model: 140.0}
    # This older cache_config_info has no num_gpu_blocks label: the signal is absent, not 0.
    assert values(scrape, "vllm_gpu_memory_utilization") == {labels(): 0.9}
    assert values(scrape, "vllm_block_size") == {labels(): 16.0}
    assert values(scrape, "vllm_num_gpu_blocks") == {}
    assert scrape.engines == ()
    assert scrape.unknown_families == frozenset()
    assert all(s.at == 100.0 and s.source == "vllm/main" for s in scrape.samples)


def test_v1_0_10_excerpt_maps_old_and_new_names() -> None:
    scrape = parse(V1_0_10)
    # One engine: its series are stored once, as the server's (no engine label).
    aggregate = labels(model_name=GLM)
    assert values(scrape, "vllm_kv_cache_usage_ratio") == {aggregate: 9.75010481363281e-06}
    # vllm:gpu_prefix_cache_hits is the deprecated name; its replacement is not on this page.
    assert values(scrape, "vllm_prefix_cache_hits_total") == {aggregate: 0.0}
    assert values(scrape, "vllm_prefix_cache_queries_total") == {aggregate: 32.0}
    assert scrape.deprecated_families == {"vllm:gpu_prefix_cache_hits"}
    assert scrape.superseded_families == frozenset()
    assert scrape.engines == ("0",)
    assert len(scrape.samples) == 3  # the _created series are ignored


def test_v0_33_page_gives_every_canonical_signal() -> None:
    scrape = parse(V0_33)
    aggregate = labels(model_name=QWEN)
    expected = {
        "vllm_num_requests_running": 12.0,
        "vllm_num_requests_waiting": 3.0,
        "vllm_kv_cache_usage_ratio": 0.8125,
        "vllm_num_preemptions_total": 7.0,
        "vllm_prompt_tokens_total": 183245.0,
        "vllm_generation_tokens_total": 90412.0,
        "vllm_prefix_cache_queries_total": 120000.0,
        "vllm_prefix_cache_hits_total": 43000.0,
        "vllm_ttft_seconds_count": 7.0,
        "vllm_ttft_seconds_sum": 4.68,
        "vllm_itl_seconds_count": 6.0,
        "vllm_itl_seconds_sum": 0.21,
        "vllm_request_tpot_seconds_count": 3.0,
        "vllm_e2e_seconds_sum": 4.5,
        "vllm_queue_seconds_count": 3.0,
    }
    for name, value in expected.items():
        assert values(scrape, name) == {aggregate: value}, name
    assert (
        values(scrape, "vllm_num_requests_waiting_by_reason")[
            labels(model_name=QWEN, reason="capacity")
        ]
        == 3.0
    )
    assert (
        values(scrape, "vllm_request_success_total")[
            labels(model_name=QWEN, finished_reason="stop")
        ]
        == 311.0
    )
    ttft = values(scrape, "vllm_ttft_seconds_bucket")
    assert len(ttft) == 23
    assert ttft[labels(model_name=QWEN, le="0.25")] == 4.0
    assert ttft[labels(model_name=QWEN, le="+Inf")] == 7.0
    itl = values(scrape, "vllm_itl_seconds_bucket")
    assert itl[labels(model_name=QWEN, le="0.025")] == 3.0
    assert values(scrape, "vllm_num_gpu_blocks") == {labels(): 29205.0}
    assert scrape.engines == ("0",)
    assert not any(sample.key.label("engine") for sample in scrape.samples)
    assert values(scrape, "vllm_gpu_memory_utilization")[labels()] == 0.9
    assert values(scrape, "vllm_block_size")[labels()] == 16.0
    assert scrape.unknown_families == frozenset()
    assert scrape.dropped_samples == 0
    assert not scrape.underscore_prefix


def test_data_parallel_page_gives_per_engine_and_aggregated_samples() -> None:
    scrape = parse(V0_33_DP2)
    assert scrape.engines == ("0", "1")

    def per_engine_and_total(name: str, **extra: str) -> tuple[float, float, float]:
        found = values(scrape, name)
        return (
            found[labels(model_name=QWEN, engine="0", **extra)],
            found[labels(model_name=QWEN, engine="1", **extra)],
            found[labels(model_name=QWEN, **extra)],
        )

    assert per_engine_and_total("vllm_num_requests_running") == (12.0, 5.0, 17.0)
    assert per_engine_and_total("vllm_num_requests_waiting") == (3.0, 1.0, 4.0)
    assert per_engine_and_total("vllm_num_requests_waiting_by_reason", reason="capacity") == (
        3.0,
        1.0,
        4.0,
    )
    # KV usage is a ratio: the aggregate is the mean, never a sum above 1.
    assert per_engine_and_total("vllm_kv_cache_usage_ratio") == (0.8125, 0.4375, 0.625)
    assert per_engine_and_total("vllm_num_preemptions_total") == (7.0, 14.0, 21.0)
    assert per_engine_and_total("vllm_request_success_total", finished_reason="stop") == (
        311.0,
        622.0,
        933.0,
    )
    assert per_engine_and_total("vllm_ttft_seconds_bucket", le="0.25") == (4.0, 8.0, 12.0)
    assert per_engine_and_total("vllm_ttft_seconds_bucket", le="+Inf") == (7.0, 14.0, 21.0)
    assert per_engine_and_total("vllm_ttft_seconds_count") == (7.0, 14.0, 21.0)
    assert per_engine_and_total("vllm_ttft_seconds_sum")[2] == pytest.approx(4.68 * 3)
    blocks = values(scrape, "vllm_num_gpu_blocks")
    assert blocks[labels()] == 2 * 29205.0
    assert values(scrape, "vllm_gpu_memory_utilization")[labels()] == 0.9
    assert values(scrape, "vllm_block_size")[labels()] == 16.0
    # Each series of the single-engine page (stored once, as the server's) is here once per
    # engine, plus the aggregate.
    single = parse(V0_33)
    assert len(scrape.samples) == len(single.samples) * 3


@pytest.mark.parametrize(
    "page", [V0, V1_0_10, V0_33, V0_33_DP2], ids=["v0", "v1-0.10", "0.33", "dp2"]
)
def test_names_rewritten_to_vllm_underscore_give_identical_samples(page: str) -> None:
    rewritten = parse(page.replace("vllm:", "vllm_"))
    assert rewritten.samples == parse(page).samples
    assert rewritten.underscore_prefix


def _vllm_like_registry() -> CollectorRegistry:
    """A registry built the way vLLM builds its own, with prometheus-client."""
    registry = CollectorRegistry()
    names = ["model_name", "engine"]
    running_gauge = Gauge("vllm:num_requests_running", "r", names, registry=registry)
    preemptions = Counter("vllm:num_preemptions", "p", names, registry=registry)
    ttft = Histogram(
        "vllm:time_to_first_token_seconds", "t", names, buckets=(0.1, 1.0), registry=registry
    )
    for engine, running in (("0", 3), ("1", 4)):
        running_gauge.labels("m", engine).set(running)
        preemptions.labels("m", engine).inc(running * 2)
        ttft.labels("m", engine).observe(0.05 * running)
        ttft.labels("m", engine).observe(5.0)
    return registry


def test_an_openmetrics_answer_from_prometheus_client_gives_identical_samples() -> None:
    registry = _vllm_like_registry()
    plain = parse(generate_latest(registry).decode())
    # prometheus-client's OpenMetrics renderer has no annotations.
    openmetrics_text = generate_openmetrics(registry).decode()  # type: ignore[no-untyped-call]
    assert "vllm_num_requests_running{" in openmetrics_text  # the rewrite really happens
    openmetrics = parse(openmetrics_text)
    assert openmetrics.samples == plain.samples
    assert openmetrics.underscore_prefix
    assert values(plain, "vllm_num_requests_running")[labels(model_name="m")] == 7.0
    assert values(plain, "vllm_num_preemptions_total")[labels(model_name="m")] == 14.0
    assert values(plain, "vllm_ttft_seconds_bucket")[labels(model_name="m", le="1.0")] == 2.0


def test_a_deprecated_family_beside_its_replacement_is_not_counted_twice() -> None:
    page = (
        V0_33
        + 'vllm:gpu_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.5\n'
        + 'vllm:gpu_prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 999.0\n'
        + "# TYPE vllm:time_per_output_token_seconds histogram\n"
        + 'vllm:time_per_output_token_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-8B"} 50\n'
        + 'vllm:time_per_output_token_seconds_count{engine="0",model_name="Qwen/Qwen3-8B"} 50\n'
    )
    scrape = parse(page)
    assert values(scrape, "vllm_kv_cache_usage_ratio")[labels(model_name=QWEN)] == 0.8125
    assert values(scrape, "vllm_prefix_cache_hits_total")[labels(model_name=QWEN)] == 43000.0
    assert values(scrape, "vllm_itl_seconds_count")[labels(model_name=QWEN)] == 6.0
    assert values(scrape, "vllm_itl_seconds_bucket")[labels(model_name=QWEN, le="+Inf")] == 6.0
    assert scrape.superseded_families == {
        "vllm:gpu_cache_usage_perc",
        "vllm:gpu_prefix_cache_hits",
        "vllm:time_per_output_token_seconds",
    }
    assert scrape.deprecated_families == frozenset()
    assert any("ignored" in hint for hint in scrape.version_hints)


def test_the_old_itl_name_alone_is_read_as_itl() -> None:
    page = V0.replace("time_to_first_token_seconds", "time_per_output_token_seconds")
    scrape = parse(page)
    assert values(scrape, "vllm_itl_seconds_count") == {labels(model_name=LLAMA): 140.0}
    assert values(scrape, "vllm_ttft_seconds_count") == {}
    assert scrape.deprecated_families == {"vllm:time_per_output_token_seconds"}


def test_bucket_bounds_are_spelled_one_way_across_engines() -> None:
    page = (
        'vllm:e2e_request_latency_seconds_bucket{engine="0",le="1",model_name="m"} 2\n'
        'vllm:e2e_request_latency_seconds_bucket{engine="1",le="1.0",model_name="m"} 3\n'
        'vllm:e2e_request_latency_seconds_bucket{engine="1",le="+Inf",model_name="m"} 3\n'
    )
    scrape = parse(page)
    assert values(scrape, "vllm_e2e_seconds_bucket")[labels(model_name="m", le="1.0")] == 5.0
    assert values(scrape, "vllm_e2e_seconds_bucket")[labels(model_name="m", le="+Inf")] == 3.0


def test_non_finite_values_are_dropped_and_spoil_only_their_aggregate() -> None:
    page = V0_33_DP2.replace(
        'vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} 5.0',
        'vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} NaN',
    ).replace(
        'vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 3.0',
        'vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} +Inf',
    )
    scrape = parse(page)
    # An aggregate over the remaining engine would pass for the whole server: none at all.
    assert values(scrape, "vllm_num_requests_running") == {
        labels(model_name=QWEN, engine="0"): 12.0
    }
    assert values(scrape, "vllm_num_requests_waiting") == {labels(model_name=QWEN, engine="1"): 1.0}
    assert values(scrape, "vllm_kv_cache_usage_ratio")[labels(model_name=QWEN)] == 0.625
    assert scrape.dropped_samples == 2
    assert all(math.isfinite(s.value) for s in scrape.samples)


def test_engines_that_disagree_on_a_setting_give_no_aggregate_for_it() -> None:
    page = V0_33_DP2.replace(
        'engine="1",gpu_memory_utilization="0.9",num_gpu_blocks="29205"',
        'engine="1",gpu_memory_utilization="0.8",num_gpu_blocks="None"',
    )
    scrape = parse(page)
    assert values(scrape, "vllm_gpu_memory_utilization") == {
        labels(engine="0"): 0.9,
        labels(engine="1"): 0.8,
    }
    assert scrape.inconsistent_signals == {"vllm_gpu_memory_utilization"}
    # "None" (before profiling) is no number: engine 1 has no block count, the sum is partial.
    assert values(scrape, "vllm_num_gpu_blocks")[labels()] == 29205.0


def test_a_duplicated_series_rejects_the_page() -> None:
    # Before (issue 15, finding 3): the last one won, silently, and the source stayed up.
    line = 'vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 12.0\n'
    with pytest.raises(MetricsParseError, match="duplicate series") as raised:
        parse(V0_33.replace(line, line + line))
    assert raised.value.detail == "duplicate-series"


def test_unknown_vllm_families_are_reported_and_other_families_ignored() -> None:
    page = V0_33 + (
        "# TYPE vllm:brand_new_thing gauge\n"
        'vllm:brand_new_thing{engine="0"} 1\n'
        "# TYPE vllm:iteration_tokens_total histogram\n"
        'vllm:iteration_tokens_total_bucket{engine="0",le="+Inf"} 3\n'
        'vllm:brand_new_counter_total{engine="0"} 3\n'
        "python_gc_objects_collected_total 12\n"
        'process_resident_memory_bytes{instance="x"} 1e9\n'
    )
    scrape = parse(page)
    assert scrape.unknown_families == {"vllm:brand_new_thing", "vllm:brand_new_counter"}
    assert not any(s.key.name.startswith(("python", "process")) for s in scrape.samples)
    assert any("does not know" in hint for hint in scrape.version_hints)


def test_every_sample_is_labelled_with_the_instance() -> None:
    scrape = parse_vllm_metrics(V0_33_DP2, instance="gpu-7", at=5.0, source="vllm/gpu-7")
    assert {s.key.label("instance") for s in scrape.samples} == {"gpu-7"}
    assert {s.source for s in scrape.samples} == {"vllm/gpu-7"}


def test_a_page_without_vllm_metrics_says_what_to_check() -> None:
    with pytest.raises(MetricsParseError, match="--disable-log-stats") as caught:
        parse("# HELP python_info x\n# TYPE python_info gauge\npython_info 1\n")
    assert caught.value.detail == "no-vllm-metrics"
    with pytest.raises(MetricsParseError, match="--disable-log-stats"):
        parse("")


@pytest.mark.parametrize(
    "garbage",
    [
        "\x00\ufffdnot metrics {{{",
        "<html><body>502 Bad Gateway</body></html>",
        'vllm:num_requests_running{engine="0" 1',
        "vllm:num_requests_running 1 2 3 x",
        "# TYPE vllm:x",
    ],
)
def test_garbage_is_a_metrics_parse_error(garbage: str) -> None:
    with pytest.raises(MetricsParseError) as caught:
        parse(garbage)
    assert caught.value.detail in {"unparsable", "no-vllm-metrics"}
