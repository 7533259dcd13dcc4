"""The canonical vLLM vocabulary: the signal names the governor uses, whatever vLLM emits them.

vLLM renames and retires metric families between releases (``gpu_cache_usage_perc`` became
``kv_cache_usage_perc``, ``time_per_output_token_seconds`` became
``inter_token_latency_seconds``). Policies, the signal store and the simulator speak only the
names below; :mod:`daemon.sources.vllm_metrics` maps every known vLLM family onto them.

Naming: ``vllm_`` + what is measured + unit; counters end in ``_total``; histograms are
exposed as ``<name>_bucket`` (label ``le``), ``<name>_count`` and ``<name>_sum``. Every sample
carries ``instance`` (the configured target) and keeps vLLM's own labels (``model_name``,
``engine``, ``reason``, ``finished_reason``).

Data parallel: a server with several engines (label ``engine``) yields one sample per engine
and one aggregate without ``engine``, reduced as each signal's :class:`Aggregation` says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


class Kind(StrEnum):
    """What a signal's values mean over time."""

    COUNTER = "counter"
    """Cumulative since the server started; resets to zero when it restarts."""
    GAUGE = "gauge"
    """A current level."""
    HISTOGRAM = "histogram"
    """Cumulative ``_bucket{le}``, ``_count`` and ``_sum`` counters."""
    INFO = "info"
    """A setting read from a label of an info family; changes only on restart."""


class Aggregation(StrEnum):
    """How the per-engine samples of a data-parallel server reduce to the instance's sample."""

    SUM = "sum"
    """Add the engines' values: counts of requests, tokens, blocks, histogram buckets."""
    MEAN = "mean"
    """Average the engines' values (used for the KV usage ratio; see its entry)."""
    SAME = "same"
    """A setting every engine shares; no aggregate when the engines disagree."""


@dataclass(frozen=True, slots=True)
class Signal:
    """One canonical vLLM signal.

    Attributes:
        name: Canonical name (histograms: the base name, without ``_bucket`` etc.).
        kind: Counter, gauge, histogram or info.
        unit: Unit of the value (``requests``, ``seconds``, ``ratio``...).
        meaning: What it measures, in one sentence.
        aggregation: How engines reduce to the instance's value.
        families: vLLM family names without the ``vllm:`` prefix, preferred first (counters
            without ``_total``). When several are on one page only the first present is read,
            so a deprecated family shown next to its replacement is never counted twice.
        info_label: For info signals, the label of ``families`` that holds the value.
    """

    name: str
    kind: Kind
    unit: str
    meaning: str
    aggregation: Aggregation
    families: tuple[str, ...]
    info_label: str = ""


_SUM = Aggregation.SUM

SIGNALS: tuple[Signal, ...] = (
    Signal(
        "vllm_num_requests_running",
        Kind.GAUGE,
        "requests",
        "Requests in the model execution batches.",
        _SUM,
        ("num_requests_running",),
    ),
    Signal(
        "vllm_num_requests_waiting",
        Kind.GAUGE,
        "requests",
        "Requests waiting to be scheduled.",
        _SUM,
        ("num_requests_waiting",),
    ),
    Signal(
        "vllm_num_requests_waiting_by_reason",
        Kind.GAUGE,
        "requests",
        "Waiting requests by label reason (capacity, deferred); they sum to the waiting count.",
        _SUM,
        ("num_requests_waiting_by_reason",),
    ),
    Signal(
        "vllm_kv_cache_usage_ratio",
        Kind.GAUGE,
        "ratio",
        "Fraction of the KV-cache blocks in use, 0 to 1.",
        # Data-parallel engines are started from one configuration on identical GPUs, so their
        # block pools are the same size and the mean of their ratios is the instance-wide
        # fraction of blocks in use; a sum would exceed 1. Policies that care about the
        # fullest engine read the per-engine samples.
        Aggregation.MEAN,
        ("kv_cache_usage_perc", "gpu_cache_usage_perc"),
    ),
    Signal(
        "vllm_num_preemptions_total",
        Kind.COUNTER,
        "preemptions",
        "Requests preempted (their KV cache evicted and recomputed later).",
        _SUM,
        ("num_preemptions",),
    ),
    Signal(
        "vllm_prompt_tokens_total",
        Kind.COUNTER,
        "tokens",
        "Prompt (prefill) tokens processed.",
        _SUM,
        ("prompt_tokens",),
    ),
    Signal(
        "vllm_generation_tokens_total",
        Kind.COUNTER,
        "tokens",
        "Generated (decode) tokens.",
        _SUM,
        ("generation_tokens",),
    ),
    Signal(
        "vllm_request_success_total",
        Kind.COUNTER,
        "requests",
        "Finished requests by label finished_reason (stop, length, abort, error, repetition).",
        _SUM,
        ("request_success",),
    ),
    Signal(
        "vllm_admission_rejections_total",
        Kind.COUNTER,
        "requests",
        "Requests refused at admission, by label reason.",
        _SUM,
        ("admission_rejections",),
    ),
    Signal(
        "vllm_prefix_cache_queries_total",
        Kind.COUNTER,
        "tokens",
        "Tokens looked up in the prefix cache.",
        _SUM,
        ("prefix_cache_queries", "gpu_prefix_cache_queries"),
    ),
    Signal(
        "vllm_prefix_cache_hits_total",
        Kind.COUNTER,
        "tokens",
        "Tokens found in the prefix cache.",
        _SUM,
        ("prefix_cache_hits", "gpu_prefix_cache_hits"),
    ),
    Signal(
        "vllm_ttft_seconds",
        Kind.HISTOGRAM,
        "seconds",
        "Time to first token per request.",
        _SUM,
        ("time_to_first_token_seconds",),
    ),
    Signal(
        "vllm_itl_seconds",
        Kind.HISTOGRAM,
        "seconds",
        "Inter-token latency: time between consecutive output tokens (TPOT, per token).",
        _SUM,
        ("inter_token_latency_seconds", "time_per_output_token_seconds"),
    ),
    Signal(
        "vllm_request_tpot_seconds",
        Kind.HISTOGRAM,
        "seconds",
        "Mean time per output token of each request (one observation per request).",
        _SUM,
        ("request_time_per_output_token_seconds",),
    ),
    Signal(
        "vllm_e2e_seconds",
        Kind.HISTOGRAM,
        "seconds",
        "End-to-end request latency.",
        _SUM,
        ("e2e_request_latency_seconds",),
    ),
    Signal(
        "vllm_queue_seconds",
        Kind.HISTOGRAM,
        "seconds",
        "Time a request spent waiting before it was first scheduled.",
        _SUM,
        ("request_queue_time_seconds",),
    ),
    Signal(
        "vllm_prefill_seconds",
        Kind.HISTOGRAM,
        "seconds",
        "Time a request spent in prefill.",
        _SUM,
        ("request_prefill_time_seconds",),
    ),
    Signal(
        "vllm_decode_seconds",
        Kind.HISTOGRAM,
        "seconds",
        "Time a request spent in decode.",
        _SUM,
        ("request_decode_time_seconds",),
    ),
    Signal(
        "vllm_request_prompt_tokens",
        Kind.HISTOGRAM,
        "tokens",
        "Prompt length of each finished request (the what-if's workload characterisation).",
        _SUM,
        ("request_prompt_tokens",),
    ),
    Signal(
        "vllm_request_generation_tokens",
        Kind.HISTOGRAM,
        "tokens",
        "Output length of each finished request (the what-if's workload characterisation).",
        _SUM,
        ("request_generation_tokens",),
    ),
    Signal(
        "vllm_iteration_tokens",
        Kind.HISTOGRAM,
        "tokens",
        "Tokens scheduled in each engine step: its count rate is the step rate.",
        _SUM,
        ("iteration_tokens_total",),
    ),
    Signal(
        "vllm_num_gpu_blocks",
        Kind.INFO,
        "blocks",
        "KV-cache blocks allocated on the GPUs; the aggregate is the instance's capacity.",
        _SUM,
        ("cache_config_info",),
        info_label="num_gpu_blocks",
    ),
    Signal(
        "vllm_gpu_memory_utilization",
        Kind.INFO,
        "ratio",
        "The --gpu-memory-utilization setting, 0 to 1.",
        Aggregation.SAME,
        ("cache_config_info",),
        info_label="gpu_memory_utilization",
    ),
    Signal(
        "vllm_block_size",
        Kind.INFO,
        "tokens",
        "Tokens per KV-cache block.",
        Aggregation.SAME,
        ("cache_config_info",),
        info_label="block_size",
    ),
)

BY_NAME: Mapping[str, Signal] = MappingProxyType({signal.name: signal for signal in SIGNALS})
"""Every canonical signal by name."""

KNOWN_UNUSED_FAMILIES: frozenset[str] = frozenset(
    {
        # Families vLLM exposes that no policy reads yet. They are listed so that a scrape's
        # ``unknown_families`` names only what is new (a rename the table above misses).
        "cpu_cache_usage_perc",
        "cpu_prefix_cache_hit_rate",
        "gpu_prefix_cache_hit_rate",
        "lora_requests_info",
        "num_requests_swapped",
        "request_inference_time_seconds",
        "request_max_num_generation_tokens",
        "request_params_max_tokens",
        "request_params_n",
        "spec_decode_num_accepted_tokens",
        "spec_decode_num_accepted_tokens_per_pos",
        "spec_decode_num_draft_tokens",
        "spec_decode_num_drafts",
    }
)
"""vLLM families (without prefix, counters without ``_total``) deliberately not mapped."""
