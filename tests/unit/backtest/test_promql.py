"""The catalogue as PromQL: the same signals, reductions and window as the daemon's own."""

from __future__ import annotations

from daemon.app.backtest.promql import catalogue_queries, default_selector
from daemon.sources.catalogue import CATALOGUE

SELECTOR = 'instance="10.0.0.5:8000"'


def test_gauges_reduce_engines_as_the_vocabulary_says() -> None:
    queries = catalogue_queries(SELECTOR, 60.0)
    assert queries["running"] == f"sum(vllm:num_requests_running{{{SELECTOR}}})"
    # The mean of the engines' ratios; the older family only where the newer is absent.
    assert queries["kv_usage"] == (
        f"avg(vllm:kv_cache_usage_perc{{{SELECTOR}}}) or avg(vllm:gpu_cache_usage_perc{{{SELECTOR}}})"
    )


def test_rates_and_quantiles_use_the_window_and_the_entry_labels() -> None:
    queries = catalogue_queries(SELECTOR, 90.0)
    assert queries["preemptions_per_s"] == (
        f"sum(rate(vllm:num_preemptions_total{{{SELECTOR}}}[90s]))"
    )
    assert queries["errors_per_s"] == (
        f'sum(rate(vllm:request_success_total{{{SELECTOR},finished_reason="error"}}[90s]))'
    )
    assert queries["ttft_p95_s"] == (
        "histogram_quantile(0.95, sum by (le) "
        f"(rate(vllm:time_to_first_token_seconds_bucket{{{SELECTOR}}}[90s])))"
    )


def test_what_prometheus_cannot_answer_has_no_query() -> None:
    queries = catalogue_queries(SELECTOR, 60.0)
    missing = set(CATALOGUE) - set(queries)
    assert missing == {
        "healthy",
        "num_gpu_blocks",
        "gpu_memory_utilization",
        "gate_cap",
        "gate_in_flight",
        "gate_queue",
        "gate_queue_time_s",
        "gate_refusals_per_s",
        "gate_admitted_per_s",
    }


def test_the_default_selector_is_the_scraped_address() -> None:
    assert default_selector("http://10.0.0.5:8000") == 'instance="10.0.0.5:8000"'
    assert default_selector("https://vllm.internal:8443/") == 'instance="vllm.internal:8443"'
