"""``/metrics`` of the simulated server: vLLM 0.33's families, names, labels and help texts.

Families, help texts and labels follow ``vllm/v1/metrics/loggers.py`` of vLLM 0.33.0 as
``tests/fixtures/vllm-metrics/v0.33-synthesized.txt`` renders them: every series carries
``model_name`` and ``engine="0"`` (one engine, no data parallelism) except the info gauge
``cache_config_info``. Gauges are read from the engine at scrape time; counters of tokens and
preemptions are the engine's own; histograms and finished-request counts are observed as
steps end and requests finish, as vLLM's stat loggers do.

What differs from a real server, on purpose:

* The prefix cache (:mod:`simulator.prefix_cache`) can hit only for requests whose prompt
  came as token ids; its counters count every admitted request's tokens as queried, as vLLM
  does, and ``cache_config_info`` says whether the cache is on.
* Latency histograms (queue, prefill, decode, inference, e2e, per-request TPOT) observe
  completed requests only; aborted ones count in ``request_success_total{finished_reason=
  "abort"}``.
* ``request_prompt_tokens`` and ``request_generation_tokens`` observe every request counted
  in ``request_success_total`` (completed and aborted), as vLLM does; their buckets are
  vLLM's 1-2-5 series up to ``max_model_len`` (:func:`~simulator.server.histograms.\
  one_two_five_buckets`), which the simulator does not model otherwise: the YAML's
  ``max-model-len`` when it gives one, else the Llama 3.x context of 131,072 tokens.
* ``request_params_*`` and ``request_max_num_generation_tokens`` are absent: no governor
  signal reads them.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Sample

from simulator.engine import Engine, EngineSnapshot
from simulator.requests import FinishedRequest, Outcome, RejectReason
from simulator.server.clock import SimulatedNow
from simulator.server.histograms import (
    ITERATION_TOKENS_BUCKETS,
    REQUEST_LATENCY_BUCKETS,
    TOKEN_LATENCY_BUCKETS,
    TTFT_BUCKETS,
    WeightedHistogram,
    one_two_five_buckets,
)
from simulator.steps import EngineCounters, StepResult

FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
# Admission limits of the API server (max-num-queued-reqs, max-num-queued-tokens).
ADMISSION_REASONS = (RejectReason.MAX_NUM_QUEUED_REQS, RejectReason.MAX_NUM_QUEUED_TOKENS)
_LABELS = ("model_name", "engine")
# vLLM's max_model_len when the YAML sets none: the context length of the Llama 3.x models the
# shipped profiles stand for (a real server reads it from the model's config).
DEFAULT_MAX_MODEL_LEN = 131_072
# The per-request length histograms, whose buckets depend on max_model_len.
_LENGTHS = {
    "request_prompt_tokens": "Number of prefill tokens processed.",
    "request_generation_tokens": "Number of generation tokens processed.",
}

# name -> (help text, bucket bounds), in vLLM's order of registration.
_HISTOGRAMS: dict[str, tuple[str, tuple[float, ...]]] = {
    "iteration_tokens_total": (
        "Histogram of number of tokens per engine_step.",
        ITERATION_TOKENS_BUCKETS,
    ),
    "time_to_first_token_seconds": (
        "Histogram of time to first token in seconds.",
        TTFT_BUCKETS,
    ),
    "inter_token_latency_seconds": (
        "Histogram of inter-token latency in seconds.",
        TOKEN_LATENCY_BUCKETS,
    ),
    "request_time_per_output_token_seconds": (
        "Histogram of time_per_output_token_seconds per request.",
        TOKEN_LATENCY_BUCKETS,
    ),
    "e2e_request_latency_seconds": (
        "Histogram of e2e request latency in seconds.",
        REQUEST_LATENCY_BUCKETS,
    ),
    "request_queue_time_seconds": (
        "Histogram of time spent in WAITING phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
    "request_inference_time_seconds": (
        "Histogram of time spent in RUNNING phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
    "request_prefill_time_seconds": (
        "Histogram of time spent in PREFILL phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
    "request_decode_time_seconds": (
        "Histogram of time spent in DECODE phase for request.",
        REQUEST_LATENCY_BUCKETS,
    ),
}


class VllmMetrics:
    """A prometheus-client collector that renders one simulated engine as vLLM 0.33 does.

    Args:
        engine: The engine, read at every scrape.
        clock: The simulated clock the engine runs on.
        created: Unix time the counters started (the ``_created`` series).
    """

    def __init__(self, engine: Engine, clock: SimulatedNow, *, created: float) -> None:
        self._engine = engine
        self._clock = clock
        settings = engine.settings
        self._settings = settings
        self._created = created
        self._labels = [settings.served_model_name, "0"]
        lengths = one_two_five_buckets(max_model_len(settings.ignored))
        self._histograms = {name: WeightedHistogram(lengths) for name in _LENGTHS} | {
            name: WeightedHistogram(bounds) for name, (_, bounds) in _HISTOGRAMS.items()
        }
        self._finished = dict.fromkeys(FINISHED_REASONS, 0)

    # -- observation -------------------------------------------------------------------

    def observe_step(self, result: StepResult) -> None:
        """Record what one engine step produced."""
        histograms = self._histograms
        plan = result.plan
        histograms["iteration_tokens_total"].observe(plan.prefill_tokens + plan.decode_tokens)
        itl = histograms["inter_token_latency_seconds"]
        for seconds, count in result.inter_token_latencies:
            itl.observe(seconds, count)
        ttft = histograms["time_to_first_token_seconds"]
        for seconds in result.ttfts:
            ttft.observe(seconds)

    def observe_finished(self, record: FinishedRequest, finished_reason: str) -> None:
        """Record a request that ended; rejected ones are the engine's admission counters."""
        if record.outcome is Outcome.REJECTED:
            return
        self._finished[finished_reason] += 1
        self._histograms["request_prompt_tokens"].observe(record.prompt_tokens)
        self._histograms["request_generation_tokens"].observe(record.output_tokens)
        if record.outcome is not Outcome.COMPLETED:
            return
        observed = (
            ("e2e_request_latency_seconds", record.e2e_s),
            ("request_queue_time_seconds", record.queue_time_s),
            ("request_prefill_time_seconds", record.prefill_time_s),
            ("request_decode_time_seconds", record.decode_time_s),
            ("request_time_per_output_token_seconds", record.tpot_s),
        )
        for name, value in observed:
            if value is not None:
                self._histograms[name].observe(value)
        if record.prefill_time_s is not None and record.decode_time_s is not None:
            inference = record.prefill_time_s + record.decode_time_s
            self._histograms["request_inference_time_seconds"].observe(inference)

    # -- collection --------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        """Every ``vllm:*`` family, as prometheus-client's registry asks for them."""
        yield from self._gauges(self._engine.snapshot(self._clock.now()))
        yield from self._counters(self._engine.counters or EngineCounters())
        for name, help_text in _LENGTHS.items():
            yield self._histogram(name, help_text)
        for name, (help_text, _) in _HISTOGRAMS.items():
            yield self._histogram(name, help_text)
        yield self._cache_config_info()

    def _gauges(self, state: EngineSnapshot) -> Iterator[Metric]:
        labels = self._labels
        running = GaugeMetricFamily(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            labels=_LABELS,
        )
        running.add_metric(labels, state.num_running)
        yield running
        waiting = GaugeMetricFamily(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            labels=_LABELS,
        )
        waiting.add_metric(labels, state.num_waiting)
        yield waiting
        by_reason = GaugeMetricFamily(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
            "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA "
            "budget, KV transfer, blocked status). Sum of all reasons equals "
            "vllm:num_requests_waiting.",
            labels=(*_LABELS, "reason"),
        )
        # Nothing in the simulated engine defers a request: every waiting one waits for room.
        by_reason.add_metric([*labels, "capacity"], state.num_waiting)
        by_reason.add_metric([*labels, "deferred"], 0)
        yield by_reason
        usage = GaugeMetricFamily(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            labels=_LABELS,
        )
        usage.add_metric(labels, state.kv_usage)
        yield usage

    def _counters(self, counters: EngineCounters) -> Iterator[Metric]:
        plain = (
            ("num_preemptions", "Cumulative number of preemption from the engine.", 0.0),
            (
                "prefix_cache_queries",
                "Prefix cache queries, in terms of number of queried tokens.",
                0.0,
            ),
            ("prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", 0.0),
            ("prompt_tokens", "Number of prefill tokens processed.", 0.0),
            ("generation_tokens", "Number of generation tokens processed.", 0.0),
        )
        values = {
            "num_preemptions": counters.preemptions,
            "prompt_tokens": counters.prompt_tokens,
            "generation_tokens": counters.generation_tokens,
            "prefix_cache_queries": counters.prefix_cache_queries,
            "prefix_cache_hits": counters.prefix_cache_hits,
        }
        for name, help_text, zero in plain:
            family = CounterMetricFamily(f"vllm:{name}", help_text, labels=_LABELS)
            family.add_metric(self._labels, values.get(name, zero), created=self._created)
            yield family
        success = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=(*_LABELS, "finished_reason"),
        )
        for reason, count in self._finished.items():
            success.add_metric([*self._labels, reason], count, created=self._created)
        yield success
        rejections = CounterMetricFamily(
            "vllm:admission_rejections",
            "Number of requests rejected by the API server's admission limits.",
            labels=(*_LABELS, "reason"),
        )
        for reason in ADMISSION_REASONS:
            count = counters.admission_rejections.get(reason.value, 0)
            rejections.add_metric([*self._labels, reason.value], count, created=self._created)
        yield rejections

    def _histogram(self, name: str, help_text: str) -> Metric:
        histogram = self._histograms[name]
        family = HistogramMetricFamily(f"vllm:{name}", help_text, labels=_LABELS)
        family.add_metric(self._labels, histogram.buckets(), histogram.total)
        labels = dict(zip(_LABELS, self._labels, strict=True))
        family.samples.append(Sample(f"vllm:{name}_created", labels, self._created))
        return family

    def _cache_config_info(self) -> Metric:
        settings = self._settings
        ignored = dict(settings.ignored)
        labels = {
            "block_size": str(settings.block_size),
            "cache_dtype": ignored.get("kv-cache-dtype", "auto"),
            "enable_prefix_caching": str(settings.enable_prefix_caching),
            "engine": "0",
            "gpu_memory_utilization": ignored.get("gpu-memory-utilization", "0.9"),
            "num_gpu_blocks": str(settings.num_gpu_blocks),
        }
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labels=tuple(labels),
        )
        info.add_metric(list(labels.values()), 1.0)
        return info


def max_model_len(ignored: tuple[tuple[str, str], ...]) -> int:
    """The YAML's ``max-model-len`` when it is a plain number, else the default (``/tokenize``).

    vLLM also takes ``32k`` / ``32K`` (decimal and binary); only these figures depend on it
    here, so such a value falls back to the default rather than being guessed.
    """
    text = dict(ignored).get("max-model-len", "")
    return int(text) if text.isdigit() and int(text) >= 1 else DEFAULT_MAX_MODEL_LEN
