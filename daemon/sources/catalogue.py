"""The signals policies and people use, by short name, for every vLLM target.

Short names (``running``, ``kv_usage``, ``ttft_p95_s``...) stand for a canonical series of the
vLLM vocabulary or a derived signal, read for one vLLM instance (its ``target``). They are the
names the policy language and ``vllm-governor signals`` speak; the long canonical names stay
available for everything else.

``tpot_p95_s`` is the inter-token latency quantile: vLLM's ``time_per_output_token`` was
renamed ``inter_token_latency``; it counts every token, so the steps that carry a prefill chunk
weigh in it as often as they occur. ``request_tpot_p95_s`` is the quantile of each finished
request's own mean (``request_time_per_output_token``, one observation per request): what a
per-request SLO (a request meets TPOT <= 100 ms) is judged on.

``gate_*`` read the admission gate in front of the instance (HAProxy, through the HAProxy
source configured by ``[vllm.gate]``); they have no data for an instance without a gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from daemon.sources.declarations import SignalDeclaration, unit_of
from daemon.sources.derived import DERIVED_SIGNALS
from daemon.sources.domains import COUNT, FLAG, NON_NEGATIVE, RATIO, Domain

# The source of the gate's signals (HAProxy, through ``[vllm.gate]``); the others are vLLM's.
GATE_PREFIX = "gate_"


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    """One short name and what it reads.

    Attributes:
        name: The short name (``kv_usage``).
        series: The canonical series read as is, for gauges; None for derived signals.
        derived: The derived signal computed over the window; None for gauges.
        meaning: One line for people.
        domain: The values it can plausibly take (:mod:`daemon.sources.domains`).
        only: Labels the series must carry (``finished_reason=error`` for ``errors_per_s``).
    """

    name: str
    series: str | None
    derived: str | None
    meaning: str
    domain: Domain
    only: tuple[tuple[str, str], ...] = ()

    @property
    def source(self) -> str:
        """The kind of source that produces it: ``haproxy`` for the gate's, else ``vllm``."""
        return "haproxy" if self.name.startswith(GATE_PREFIX) else "vllm"

    def declaration(self) -> SignalDeclaration:
        """The entry as a per-target scalar signal of its source."""
        return SignalDeclaration(
            self.name,
            self.source,
            self.meaning,
            unit_of(self.name),
            per_target=True,
            declared_domain=self.domain,
        )


def _gauge(name: str, series: str, meaning: str, domain: Domain) -> CatalogueEntry:
    return CatalogueEntry(name, series, None, meaning, domain)


def _derived(name: str, derived: str, meaning: str, **only: str) -> CatalogueEntry:
    """A rate of a counter or a quantile of durations: never negative, always finite."""
    if derived not in DERIVED_SIGNALS:
        message = f"{name}: unknown derived signal {derived}"
        raise ValueError(message)
    return CatalogueEntry(name, None, derived, meaning, NON_NEGATIVE, tuple(sorted(only.items())))


CATALOGUE: Mapping[str, CatalogueEntry] = {
    entry.name: entry
    for entry in [
        _gauge("running", "vllm_num_requests_running", "Requests running in the engine", COUNT),
        _gauge("waiting", "vllm_num_requests_waiting", "Requests waiting to be scheduled", COUNT),
        _gauge(
            "kv_usage", "vllm_kv_cache_usage_ratio", "Share of KV cache blocks in use, 0-1", RATIO
        ),
        _gauge("healthy", "vllm_health_ok", "1 when /health answers 200, 0 on 503", FLAG),
        _gauge(
            "num_gpu_blocks", "vllm_num_gpu_blocks", "KV cache blocks allocated at start", COUNT
        ),
        _gauge(
            "gpu_memory_utilization",
            "vllm_gpu_memory_utilization",
            "vLLM's --gpu-memory-utilization",
            RATIO,
        ),
        _derived("preemptions_per_s", "vllm_preemptions_per_s", "Preemptions per second"),
        _derived("gen_tokens_per_s", "vllm_generation_tokens_per_s", "Generated tokens/s"),
        _derived("prompt_tokens_per_s", "vllm_prompt_tokens_per_s", "Prompt tokens/s"),
        _derived(
            "errors_per_s",
            "vllm_requests_finished_per_s",
            "Requests ending in error per second",
            finished_reason="error",
        ),
        _derived(
            "aborts_per_s",
            "vllm_requests_finished_per_s",
            "Requests aborted per second",
            finished_reason="abort",
        ),
        _derived("rejections_per_s", "vllm_admission_rejections_per_s", "Admission refusals/s"),
        # The admission gate (HAProxy) in front of the instance, read by its HAProxy source.
        _gauge("gate_cap", "haproxy_server_maxconn", "Admission cap at the gate (maxconn)", COUNT),
        _gauge(
            "gate_in_flight", "haproxy_sessions_current", "Requests past the gate, in vLLM", COUNT
        ),
        _gauge("gate_queue", "haproxy_queue_current", "Requests queued at the gate", COUNT),
        _gauge(
            "gate_queue_time_s",
            "haproxy_queue_time_seconds",
            "Wait at the gate, seconds (HAProxy's average over its last 1024 requests)",
            NON_NEGATIVE,
        ),
        _derived(
            "gate_admitted_per_s",
            "haproxy_sessions_per_s",
            "Requests the gate let through to vLLM per second",
        ),
        _derived(
            "gate_refusals_per_s",
            "haproxy_backend_5xx_per_s",
            "The gate's backend 5xx per second: its 503s on queue timeouts, SLO misses",
        ),
        *[
            _derived(f"{short}_p{p}_s", f"vllm_{long}_p{p}_s", f"{what}, p{p}, seconds")
            for short, long, what in [
                ("ttft", "ttft", "Time to first token"),
                ("tpot", "itl", "Time per output token"),
                ("request_tpot", "request_tpot", "Time per output token of each request"),
                ("e2e", "e2e", "End-to-end latency"),
                ("queue", "queue", "Queue time"),
            ]
            for p in (50, 95, 99)
        ],
    ]
}


def catalogue_declarations(source: str) -> tuple[SignalDeclaration, ...]:
    """The declarations of the catalogue's entries produced by ``source``."""
    return tuple(e.declaration() for e in CATALOGUE.values() if e.source == source)
